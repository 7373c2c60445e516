#!/usr/bin/env python3
"""SQuAD v1.1 files from real English text on this machine (Debian's
license texts, /usr/share/common-licenses), for tests/squad_test.sh.

Each paragraph is a few consecutive sentences of one license. Each question
names a phrase of 1 to 3 words that occurs once in its paragraph ("Where
does the text say X Y?") and its answer is that phrase where it stands, so
the answer is findable from the context by matching the question's words.
The phrases' words are among the texts' 300 most frequent, so that a small
model trained from scratch for a few minutes meets each of them often.
The license files are split in two: training questions come from some,
evaluation questions from others. Also writes vocab.txt: every word and
punctuation character of the text, lower-cased, with BERT's special tokens
(so the uncased tokenizer never needs [UNK]), and prints the trivial
baseline's exact match and F1 on the evaluation set: the first n words of
the context, n the answer's length, scored with the official script's
normalization.

  make_squad_json.py OUT_DIR [--train N] [--eval N]
"""
import argparse
import collections
import glob
import json
import os
import random
import re
import string

LICENSES = "/usr/share/common-licenses"
TEMPLATES = ["Where does the text say {}?", "Find {} in the text.", "Which words read {}?"]


def sentences_of(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"\s+", " ", text)
    return [s.strip() for s in re.split(r"(?<=[.;:])\s+", text) if len(s.split()) >= 6]


def paragraphs(paths, rng):
    out = []
    for path in paths:
        sents = sentences_of(path)
        i = 0
        while i < len(sents):
            n = rng.randint(2, 4)
            para = " ".join(sents[i:i + n])
            i += n
            if 25 <= len(para.split()) <= 90:
                out.append(para)
    return out


def words_with_spans(context):
    return [(m.group(), m.start()) for m in re.finditer(r"[A-Za-z0-9]+", context)]


def question_of(context, rng, qid, frequent):
    words = words_with_spans(context)
    counts = collections.Counter(w.lower() for w, _ in words)
    for _ in range(100):
        length = rng.randint(1, 3)
        at = rng.randrange(0, len(words) - length)
        phrase_words = words[at:at + length]
        if any(counts[w.lower()] > 1 or w.lower() not in frequent for w, _ in phrase_words):
            continue
        start = phrase_words[0][1]
        end = phrase_words[-1][1] + len(phrase_words[-1][0])
        answer = context[start:end]
        if not re.fullmatch(r"[A-Za-z0-9 ]+", answer):
            continue  # punctuation inside: keep the phrase plain words
        question = rng.choice(TEMPLATES).format(" ".join(w.lower() for w, _ in phrase_words))
        return {"id": qid, "question": question, "answers": [{"text": answer, "answer_start": start}]}
    return None


def squad(paras, count, rng, prefix, frequent):
    data, made = [], 0
    while made < count:
        context = paras[made % len(paras)] if made < len(paras) else rng.choice(paras)
        q = question_of(context, rng, f"{prefix}{made}", frequent)
        if q is None:
            paras = [p for p in paras if p != context] or paras
            continue
        data.append({"title": prefix, "paragraphs": [{"context": context, "qas": [q]}]})
        made += 1
    return {"version": "1.1", "data": data}


def normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1(prediction, truth):
    p, t = normalize(prediction).split(), normalize(truth).split()
    same = sum((collections.Counter(p) & collections.Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--eval", type=int, default=200)
    args = ap.parse_args()
    rng = random.Random(7)
    paths = sorted(glob.glob(os.path.join(LICENSES, "*")))
    paths = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    held_out = [p for p in paths if os.path.basename(p) in ("Apache-2.0", "MPL-2.0", "Artistic")]
    train_paths = [p for p in paths if p not in held_out]
    counts = collections.Counter()
    for path in paths:
        counts.update(w for w in re.findall(r"[a-z0-9]+", open(path, encoding="utf-8", errors="replace").read().lower())
                      if len(w) >= 3)
    frequent = {w for w, _ in counts.most_common(300)}
    train = squad(paragraphs(train_paths, rng), args.train, rng, "train-", frequent)
    dev = squad(paragraphs(held_out, rng), args.eval, rng, "dev-", frequent)
    for name, doc in (("train.json", train), ("dev.json", dev)):
        json.dump(doc, open(os.path.join(args.out, name), "w"))
    vocab = set()
    for path in paths:
        text = open(path, encoding="utf-8", errors="replace").read().lower()
        vocab.update(re.findall(r"[a-z0-9]+", text))
        vocab.update(ch for ch in text if not ch.isalnum() and not ch.isspace())
    for template in TEMPLATES:
        vocab.update(re.findall(r"[a-z0-9]+", template.lower()))
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(vocab):
            f.write(token + "\n")
    exact = f1_sum = 0.0
    questions = [(p["context"], q) for a in dev["data"] for p in a["paragraphs"] for q in p["qas"]]
    for context, q in questions:
        truth = q["answers"][0]["text"]
        guess = " ".join(context.split()[:len(truth.split())])
        exact += normalize(guess) == normalize(truth)
        f1_sum += f1(guess, truth)
    print(f"baseline exact_match {100 * exact / len(questions):.4f} f1 {100 * f1_sum / len(questions):.4f} "
          f"questions {len(questions)} vocabulary {len(vocab) + 5}")


if __name__ == "__main__":
    main()
