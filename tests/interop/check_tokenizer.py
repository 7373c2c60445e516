#!/usr/bin/env python3
"""tools/tokenize_text against Hugging Face's BertTokenizer (uncased) on the
same vocabulary: lines of many scripts, accents, punctuation, symbols,
controls and whitespace kinds are tokenized by both and their ids compared
line by line. The vocabulary is built here from transformers' own basic
tokens of the text: each word whole, and for some words only a prefix and
a "##" rest, so WordPiece's splits are compared too; some words are left
out, for [UNK].

usage: check_tokenizer.py --tokenize-text BIN --out DIR
Exit 0: equal; 1: a difference (printed); 3: transformers cannot be
imported (the check is skipped).
"""
import argparse
import os
import subprocess
import sys

LINES = [
    "Hello, World! Don't stop-believing.",
    "Café crème brûlée à la carte; naïve coöperation",
    "CAFE\u0301 vs caf\u00e9 (combining and precomposed)",
    "\u0130stanbul \u0131s\u0131k \u00df STRASSE \ufb01ne",
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03ac\u03bb\u03c6\u03b1 \u03a3",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0401\u043b\u043a\u0430",
    "\u4f60\u597d\u4e16\u754c\uff01\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8",
    "\u304c\u304e\u3050\u3052\u3054 \u30ab\u30bf\u30ab\u30ca \ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd",
    "Vi\u1ec7t Nam c\u1ee7a t\u00f4i",
    "price: $5.99 or \u20ac4,50 \u00a3 \u00a5 50% off #1 @home ^_^ ~tilde~ `code` {x} [y] |z|",
    "math \u2211 x\u00b2 \u2264 \u221e \u00b1 \u00d7 \u00f7 \u2192 \u00bfQu\u00e9? \u00a1S\u00ed!",
    "quotes \u201cdouble\u201d \u2018single\u2019 \u00abguillemets\u00bb \u2014 em \u2013 en \u2026 ellipsis",
    "emoji \U0001f600 hi\U0001f44d \u2764\ufe0f \U0001f1fa\U0001f1f8",
    "tabs\tand\u00a0no-break\u3000ideographic\u2003em\u200bzero\u200dwidth",
    "control\u0007bell\u0000nul\ufffdreplacement\u00adsoft hyphen",
    "digits 0123 \u0663\u0664 \uff11\uff12 mixed42word",
    "[MASK] stays [CLS] too but [mask] splits",
    "UPPER lower MiXeD",
    "a" * 120,
]


def basic_words(line):
    """BERT's basic (pre-WordPiece) split of `line`, uncased: transformers'
    BasicTokenizer where it still exists (before 5.0), else the same
    normalizer and pre-tokenizer from the tokenizers library, which
    transformers 5's BertTokenizer runs on."""
    try:
        from transformers.models.bert.tokenization_bert import BasicTokenizer
        return BasicTokenizer(do_lower_case=True).tokenize(line)
    except ImportError:
        from tokenizers.normalizers import BertNormalizer
        from tokenizers.pre_tokenizers import BertPreTokenizer
        text = BertNormalizer(lowercase=True).normalize_str(line)
        return [w for w, _ in BertPreTokenizer().pre_tokenize_str(text)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenize-text", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    try:
        from transformers import BertTokenizer
    except Exception as e:  # not installed, or broken
        print(f"check_tokenizer: transformers cannot be imported ({e}); skipped")
        return 3
    os.makedirs(args.out, exist_ok=True)
    words = []
    for line in LINES:
        for w in basic_words(line):
            if w not in words:
                words.append(w)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for i, w in enumerate(words):
        if w in vocab:
            continue
        if i % 7 == 3:
            continue  # left out: [UNK]
        if len(w) > 4 and i % 2 == 0:
            vocab += [w[:3], "##" + w[3:]]  # only pieces
        else:
            vocab.append(w)
    vocab = list(dict.fromkeys(vocab))
    vocab_path = os.path.join(args.out, "vocab.txt")
    text_path = os.path.join(args.out, "text.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(text_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(LINES) + "\n")
    theirs = BertTokenizer(vocab_file=vocab_path, do_lower_case=True)
    out = subprocess.run([args.tokenize_text, "--vocab", vocab_path, "--print", text_path], capture_output=True,
                         text=True)
    if out.returncode != 0:
        print(f"check_tokenizer: tokenize_text failed ({out.returncode}): {out.stderr.strip()}")
        return 1
    ours = out.stdout.split("\n")[: len(LINES)]
    differ = 0
    for line, mine in zip(LINES, ours):
        want = theirs.convert_tokens_to_ids(theirs.tokenize(line))
        got = [int(t) for t in mine.split()]
        if got != want:
            differ += 1
            print(f"differs: {line!r}\n  transformers {theirs.convert_ids_to_tokens(want)}\n"
                  f"  ddp_train    {theirs.convert_ids_to_tokens(got)}")
    print(f"check_tokenizer: {len(LINES)} lines, vocabulary of {len(vocab)}: "
          f"{len(LINES) - differ} equal, {differ} differ")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
