#!/usr/bin/env bash
# tokens:PATH end to end: text generated here (documents of sentences over
# a small vocabulary, with words WordPiece must split and one it cannot
# cover) is tokenized into two shards by tools/tokenize_text; bert-tiny
# trains on the directory of shards (pairs and masks drawn per sample and
# epoch); 2 ranks equal 1 rank with 2 accumulated micro-batches bit for bit
# (dropout on, ZeRO 0 and 2, over an epoch boundary); a run killed while
# writing a checkpoint and resumed from the one before equals the run never
# stopped, sharing its metrics file (each step once); a truncated shard,
# a wrong magic and a wrong id width are each one line naming the shard.
set -u
bin=launch/ddp_train
source tests/lib.sh

/usr/bin/python3 - "$tmp" <<'PY' || exit 1
import random, sys
tmp = sys.argv[1]
words = [f"w{i}" for i in range(150)]
random.seed(5)
with open(f"{tmp}/vocab.txt", "w") as f:
    for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "##ing", "##s"] + words:
        f.write(t + "\n")
for part in range(2):
    with open(f"{tmp}/text{part}.txt", "w") as f:
        for doc in range(12):
            for _ in range(random.randint(3, 9)):
                n = random.randint(4, 14)
                sentence = [random.choice(words) + random.choice(["", "", "ing", "s"]) for _ in range(n)]
                if random.random() < 0.05:
                    sentence.append("Zebra")  # not coverable: [UNK]
                f.write(" ".join(sentence).capitalize() + random.choice([".", ","]) + "\n")
            f.write("\n")
PY
mkdir -p "$tmp/shards"
for part in 0 1; do
  tools/tokenize_text --vocab "$tmp/vocab.txt" --out "$tmp/shards/part$part.tokens" "$tmp/text$part.txt" ||
    fail "tokenize_text part $part"
done
grep -q '^[0-9][0-9 ]*$' <<< "$(tools/tokenize_text --vocab "$tmp/vocab.txt" --print "$tmp/text0.txt" | sed -n 1p)" ||
  fail "tokenize_text --print"

common=(--model bert-tiny --data "tokens:$tmp/shards" --seq-len 32 --batch-size 3 --steps 6 --optimizer adamw
        --lr 1e-3 --dropout 0.1 --threads 1 --seed 3 --bucket-mb 4 --first-bucket-mb 0.5)
run() {  # run NAME NP ARGS...
  local name="$1" np="$2"; shift 2
  local launch=()
  [ "$np" -gt 1 ] && launch=(timeout 300 mpirun -np "$np" --oversubscribe --bind-to none)
  "${launch[@]}" "$bin" "${common[@]}" "$@" --metrics-file "$tmp/$name.jsonl" --save-weights "$tmp/$name.safetensors" \
    > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name"; return 1; }
}
same() {  # same A B
  /usr/bin/python3 tests/compare_losses.py "$tmp/$1.jsonl" "$tmp/$2.jsonl" --rtol 0 || fail "losses of $1 and $2 differ"
  tools/compare_weights "$tmp/$1.safetensors" "$tmp/$2.safetensors" --rtol 0 || fail "weights of $1 and $2 differ"
}

run one 1 --accumulation-steps 2
grep -q "sequences of 32 tokens from tokens:$tmp/shards" "$tmp/one.log" || { cat "$tmp/one.log"; fail "not read from the shards"; }
# The shards hold fewer than 6 global batches of 6: the run crosses into
# epoch 1, whose pairs and masks are drawn anew.
for stage in 0 2; do
  run "two_zero$stage" 2 --zero-stage "$stage"
  echo "2 ranks (ZeRO $stage) vs 1 rank with 2 micro-batches:"; same one "two_zero$stage"
done

# Stopped at a checkpoint of step 3 (killed while writing the next) and
# resumed: the run never stopped.
rm -rf "$tmp/ckpt"
DDP_TEST_CHECKPOINT_CRASH=files:0:6 "$bin" "${common[@]}" --accumulation-steps 2 --checkpoint-dir "$tmp/ckpt" \
  --checkpoint-every 3 --metrics-file "$tmp/resumed.jsonl" > "$tmp/crashed.log" 2>&1 &&
  { cat "$tmp/crashed.log"; fail "the crash hook did not fire"; }
run resumed 1 --accumulation-steps 2 --checkpoint-dir "$tmp/ckpt" --checkpoint-every 3 --resume
grep -q "continuing from .* at step 3" "$tmp/resumed.log" || { cat "$tmp/resumed.log"; fail "did not resume at step 3"; }
/usr/bin/python3 tests/compare_losses.py "$tmp/one.jsonl" "$tmp/resumed.jsonl" --rtol 0 ||
  fail "the resumed run's losses differ"
tools/compare_weights "$tmp/one.safetensors" "$tmp/resumed.safetensors" --rtol 0 || fail "the resumed run's weights differ"

# Bad shards: one line each, naming the shard.
shard="$tmp/shards/part0.tokens"
head -c -40 "$shard" > "$tmp/cut.tokens"
{ printf 'NOTATOKN'; tail -c +9 "$shard"; } > "$tmp/magic.tokens"
{ head -c 12 "$shard"; printf '\003'; tail -c +14 "$shard"; } > "$tmp/width.tokens"
refuse() {  # refuse FILE PATTERN
  local out rc
  out=$("$bin" "${common[@]}" --data "tokens:$1" --steps 1 2>&1); rc=$?
  if [ "$rc" -ne 1 ] || [ "$(printf '%s\n' "$out" | grep -c .)" -ne 1 ] || ! grep -qF -- "$2" <<< "$out"; then
    fail "expected exit 1 and one line with '$2', got exit $rc:"; printf '%s\n' "$out"
  else
    echo "refused: $out"
  fi
}
refuse "$tmp/cut.tokens" "--data $tmp/cut.tokens: $(($(stat -c %s "$shard") - 40)) bytes, its header says $(stat -c %s "$shard") (truncated)"
refuse "$tmp/magic.tokens" "--data $tmp/magic.tokens: not a token shard"
refuse "$tmp/width.tokens" "--data $tmp/width.tokens: token ids of 3 bytes"

finish "tokens test"
