#!/usr/bin/env bash
# tools/tokenize_text's time on the lines that made a quadratic tokenizer
# stall: a 10 MB single word (Hugging Face's WordPiece makes it one [UNK]),
# 10 MB of one word broken by commas every two letters (3.3 million basic
# tokens), 10 MB of accented letters (normalized through ICU), 10 MB of
# 100-letter words that WordPiece covers a letter at a time (the most work
# a word can ask of it), and 10 MB of ordinary English words, for comparison. Each line is tokenized with
# --print (ids to /dev/null), best of --rounds; the sizes are in bytes.
#   bash tools/bench/bench_tokenizer.sh [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
rounds=3
bench_options bench_tokenizer.sh --rounds=rounds -- "$@"
bench_build //tools:tokenize_text
bench_tmp
python3 - "$tmp" <<'PY'
import random, sys
tmp = sys.argv[1]
words = ["the", "tower", "was", "built", "in", "1889", "by", "gustave", "eiffel", "for", "paris", "fair", "."]
open(f"{tmp}/vocab.txt", "w").write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", "b", "##b", "##c"] +
                                              words) + "\n")
size = 10_000_000
random.seed(1)
lines = {
    "one word of 10 MB": "a" * size,
    "`ab,` repeated": "ab," * (size // 3),
    "`\u00e9` repeated": "\u00e9" * (size // 2),
    "words of 100 letters, a piece each": " ".join(["bc" * 50] * (size // 101)),
    "English words": " ".join(random.choice(words) for _ in range(size // 6)),
}
for i, (label, line) in enumerate(lines.items()):
    open(f"{tmp}/line{i}.txt", "w", encoding="utf-8").write(line + "\n")
    print(label, file=open(f"{tmp}/label{i}", "w"))
PY
echo "| line (10 MB) | tokens | seconds (best of $rounds) | MB/s |"
echo "|---|---|---|---|"
for i in 0 1 2 3 4; do
  best=""
  for _ in $(seq "$rounds"); do
    start=$(date +%s.%N)
    bazel-bin/tools/tokenize_text --vocab "$tmp/vocab.txt" --print "$tmp/line$i.txt" > "$tmp/ids$i"
    seconds=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
    best=$(python3 -c "import sys; print(min(float(x) for x in sys.argv[1:] if x))" "$seconds" "$best")
  done
  tokens=$(wc -w < "$tmp/ids$i")
  bytes=$(stat -c %s "$tmp/line$i.txt")
  python3 -c "import sys; print(f'| {sys.argv[1]} | {int(sys.argv[2])} | {float(sys.argv[3]):.2f} | {int(sys.argv[4]) / 1e6 / float(sys.argv[3]):.1f} |')" \
    "$(cat "$tmp/label$i")" "$tokens" "$best" "$bytes"
done
