#!/usr/bin/env python3
"""Writes tests/golden/squad_metric_golden.json: SQuAD v1.1's exact match and
F1, as the official evaluate-v1.1.py computes them with Python's own `re` and
`str`, on answer pairs drawn to hit what differs from a naive port:

- articles beside characters that are neither letters nor digits in
  Unicode's sense (curly quotes, guillemets, currency, degree and ellipsis
  signs, inverted punctuation, combining and format characters), where
  `\\b(a|an|the)\\b` takes the article, and beside letters and numerals of
  other scripts, where it stays;
- every character str.split() splits on (U+001C..U+001F, U+0085, the
  no-break space, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F,
  U+3000) and look-alikes it does not (U+200B, U+180E, U+FEFF, U+2060);
- str.lower() across scripts (Greek's final sigma, dotted capital I, Kelvin
  sign, Cherokee, Georgian, Deseret), ASCII-only punctuation, the bag of
  words, empty answers and the best of several ground truths.

It also writes, for every code point assigned in this Python's Unicode,
which are word characters to `re` (\\w), which str.split() splits on, and
what str.lower() makes of those it changes, so the C++ side is checked on
all of them, not only on the drawn pairs.

Run with Debian's python3 (any Python 3 gives the same pairs; the tables
follow its Unicode version, which the file records):
  /usr/bin/python3 tests/golden/make_squad_metric_golden.py
"""
import random
import re
import string
import sys
import unicodedata
from collections import Counter

from golden_io import write_golden


# --- evaluate-v1.1.py, as published ---------------------------------------

def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return (normalize_answer(prediction) == normalize_answer(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# --- the drawn pairs ------------------------------------------------------

ARTICLES = ["a", "an", "the", "A", "An", "AN", "The", "THE", "tHe"]
# Neither letters nor digits: an article beside one is a whole word to \b.
NOT_WORD = [
    "\u201c", "\u201d", "\u2018", "\u2019", "\u00ab", "\u00bb", "\u2039", "\u203a",  # quotes, guillemets
    "\u20ac", "\u00a3", "\u00a5", "\u20b9", "\u00a2",  # currency
    "\u00b0", "\u2026", "\u00bf", "\u00a1", "\u2014", "\u2013", "\u2022", "\u00a7", "\u00b6",
    "\u00a9", "\u00ae", "\u2122", "\u00d7", "\u00f7", "\u00b1", "\u00b7", "\u2192", "\u2211",
    "\u3002", "\u3001", "\u300c", "\u300d", "\u060c", "\u0964", "\u2500",
    "\U0001F600", "\U0001F30D",  # emoji, beyond the BMP
    "\u0301", "\u0308", "\u093e", "\u0e31",  # combining marks: not letters either
    "\u200b", "\u00ad", "\u2060", "\ufeff", "\u180e",  # format characters, not space to str.split()
]
# Letters and numerals of other scripts: an article beside one stays.
WORD = [
    "\u00e9", "\u00f1", "\u00df", "\u00f8", "\u00c9", "\u0130",  # Latin (dotted capital I)
    "\u03b1", "\u03a3", "\u03c3", "\u0414", "\u0434",  # Greek, Cyrillic
    "\u0628", "\u05e9", "\u0915", "\u0e01",  # Arabic, Hebrew, Devanagari, Thai
    "\u4e2d", "\u3042", "\u30ab", "\ud55c",  # CJK, Hiragana, Katakana, Hangul
    "\u0663", "\u0969", "\u00b2", "\u00bd", "\u216b", "\u2460",  # digits and numerals (Nd, No, Nl)
    "\u02b0", "\u00aa", "\u01c5", "\u212a", "\uff21",  # Lm, Lo, Lt, Kelvin sign, fullwidth A
    "\u13a0", "\u1c90", "\U00010400",  # Cherokee, Georgian Mtavruli, Deseret
    "7", "x", "Q",
]
PYTHON_SPACE = ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680"] + \
    [chr(c) for c in range(0x2000, 0x200b)] + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\t", "\n", "\r",
                                              "\x0b", "\x0c"]
WORDS = [
    "Paris", "tower", "1889", "Caf\u00e9", "\u039f\u0394\u039f\u03a3", "\u041c\u043e\u0441\u043a\u0432\u0430",
    "\u6771\u4eac", "na\u00efve", "STRASSE", "\u1e9ee", "\u0130stanbul", "\u0645\u0635\u0631", "x", "an", "theory",
    "another", "a1", "\u00bd", "5\u00b0C", "$10", "U.S.", "rock'n'roll", "Z\u00fcrich", "\u2126hm",
]


def glue(rng, article):
    """An article with a neighbour on one or both sides, or none."""
    left = rng.choice(NOT_WORD + WORD + [""] * 6)
    right = rng.choice(NOT_WORD + WORD + [""] * 6)
    if rng.random() < 0.3:
        left += rng.choice(NOT_WORD)
    return left + article + right


def space(rng):
    return rng.choice([" "] * 4 + PYTHON_SPACE + ["\u200b", "\u180e", "\ufeff", "\u2060"])


def draw_text(rng):
    parts = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.35:
            parts.append(glue(rng, rng.choice(ARTICLES)))
        elif roll < 0.85:
            word = rng.choice(WORDS)
            if rng.random() < 0.3:
                word = rng.choice(NOT_WORD) + word
            if rng.random() < 0.3:
                word += rng.choice(NOT_WORD + list("!,.;:?\"'()-"))
            parts.append(word)
        else:
            parts.append(rng.choice(NOT_WORD + WORD + list(string.punctuation)))
    text = ""
    for p in parts:
        text += (space(rng) if text else rng.choice(["", "", space(rng)])) + p
    if rng.random() < 0.2:
        text += space(rng)
    return text


def mutate(rng, text):
    """A ground truth near `text`: case changed, spaces swapped, a part
    dropped or added, punctuation sprinkled."""
    out = text
    roll = rng.random()
    if roll < 0.25:
        out = out.upper() if rng.random() < 0.5 else out.lower()
    elif roll < 0.5:
        out = "".join(space(rng) if ch.isspace() else ch for ch in out)
    elif roll < 0.7:
        words = out.split()
        if words:
            del words[rng.randrange(len(words))]
        out = space(rng).join(words)
    elif roll < 0.85:
        out = glue(rng, rng.choice(ARTICLES)) + space(rng) + out
    else:
        out = "".join(ch + (rng.choice(string.punctuation) if rng.random() < 0.2 else "") for ch in out)
    return out


def draw_pairs(count, seed=45):
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        prediction = draw_text(rng)
        truths = [mutate(rng, prediction) if rng.random() < 0.7 else draw_text(rng)
                  for _ in range(rng.randint(1, 3))]
        pairs.append((prediction, truths))
    # The corners by hand: empty texts, articles only, punctuation only.
    pairs += [("", [""]), ("", ["x"]), ("x", [""]), ("the", ["a"]), ("\u201cthe\u201d", [""]),
              ("!!!", ["..."]), ("a an the", [" "]), ("\u00a0", ["\u3000"]), ("the\u20ac", ["\u20ac"]),
              ("\u00abthe\u00bb", ["\u00ab \u00bb"]), ("the\u0301", ["\u0301"]), ("\u0130", ["i\u0307"]),
              ("\u039f\u0394\u039f\u03a3", ["\u03bf\u03b4\u03bf\u03c2"]), ("x\x1cy", ["x y"]),
              ("x\u200by", ["x y"]), ("the\u00e9", ["th\u00e9"]), ("\u00bdthe", ["\u00bd"]), ("x x y", ["x y y"])]
    return pairs


# --- the tables -------------------------------------------------------------

def ranges(predicate):
    """[first, last] code point runs where predicate holds."""
    out = []
    for c in range(sys.maxunicode + 1):
        if predicate(c):
            if out and out[-1][1] == c - 1:
                out[-1][1] = c
            else:
                out.append([c, c])
    return out


def main():
    pairs = []
    for prediction, truths in draw_pairs(400):
        pairs.append({
            "prediction": prediction,
            "truths": truths,
            "em": bool(metric_max_over_ground_truths(exact_match_score, prediction, truths)),
            "f1": float(metric_max_over_ground_truths(f1_score, prediction, truths)),
        })
    word = re.compile(r"\w")
    assigned = ranges(lambda c: unicodedata.category(chr(c)) not in ("Cn", "Cs"))
    golden = {
        "unicode": unicodedata.unidata_version,
        "pairs": pairs,
        "assigned": assigned,
        "word": ranges(lambda c: unicodedata.category(chr(c)) not in ("Cn", "Cs") and word.match(chr(c)) is not None),
        "space": [c for c in range(sys.maxunicode + 1) if chr(c).isspace()],
        "lower": [[c, chr(c).lower()] for c in range(sys.maxunicode + 1)
                  if unicodedata.category(chr(c)) not in ("Cn", "Cs") and chr(c).lower() != chr(c)],
    }
    em = sum(p["em"] for p in pairs)
    partial = sum(0 < p["f1"] < 1 for p in pairs)
    print(f"{len(pairs)} pairs: {em} exact, {partial} partial F1; {len(golden['lower'])} lower-case mappings")
    write_golden("squad_metric_golden.json", golden, separators=(",", ":"))


if __name__ == "__main__":
    main()
