#!/usr/bin/env bash
# bert-tiny pretraining (MLM + NSP, AdamW, dropout 0.1) on the generated
# corpus, whose masked tokens are predictable from their segment's topic:
# after 700 steps the held-out masked-token accuracy must reach 2.5x the
# baseline of always predicting the held-out set's most frequent masked
# token (the issue's bar), and the loss must have fallen below the unigram
# entropy plus NSP's ln 2 (ln 400 + ln 2 = 6.68), which a model that ignores
# context cannot do.
set -u
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
out=$(tools/make_token_dataset --out "$tmp/eval.safetensors" --samples 256 --seq-len 64 --first-sample 1000000 \
      --seed 1) || { echo "FAIL: make_token_dataset"; exit 1; }
echo "$out"
baseline=$(printf '%s\n' "$out" | sed -n 's/.*share \([0-9.]*\)$/\1/p')
[ -n "$baseline" ] || { echo "FAIL: no baseline in: $out"; exit 1; }
launch/ddp_train --model bert-tiny --seq-len 64 --batch-size 16 --steps 700 --optimizer adamw --lr 5e-4 \
  --warmup-steps 20 --threads 2 --seed 1 --eval-data "tensors:$tmp/eval.safetensors" --eval-every 100 \
  --metrics-file "$tmp/metrics.jsonl" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; echo "FAIL: training"; exit 1; }
grep -E "eval|summary" "$tmp/train.log"
/usr/bin/python3 - "$tmp/metrics.jsonl" "$baseline" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
summary = [r["summary"] for r in records if "summary" in r][-1]
baseline = float(sys.argv[2])
accuracy, loss = summary["eval_accuracy"], summary["final_loss"]
print(f"held-out MLM accuracy {accuracy:.4f}, {accuracy / baseline:.1f}x the most-frequent baseline {baseline:.4f}; "
      f"final loss {loss:.3f}")
ok = accuracy >= 2.5 * baseline and loss < 6.68
print("all checks passed" if ok else "FAIL: below the bar")
sys.exit(0 if ok else 1)
PY
