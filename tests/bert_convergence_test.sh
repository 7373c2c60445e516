#!/usr/bin/env bash
# bert-tiny pretraining (MLM + NSP, AdamW, dropout 0.1) on the generated
# corpus, whose masked tokens are predictable from their segment's topic:
# after 700 steps the held-out masked-token accuracy must reach 2.5x the
# baseline of always predicting the held-out set's most frequent masked
# token (the issue's bar), and the loss must have fallen below the unigram
# entropy plus NSP's ln 2 (ln 400 + ln 2 = 6.68), which a model that ignores
# context cannot do. Then a classification fine-tune from those weights
# (the pretraining heads dropped, a new classifier) on a generated 4-class
# task (the topic modulo 4: majority class at most 50%) must reach 90%
# held-out accuracy.
set -u
source tests/lib.sh
out=$(tools/make_token_dataset --out "$tmp/eval.safetensors" --samples 256 --seq-len 64 --first-sample 1000000 \
      --seed 1) || { echo "FAIL: make_token_dataset"; exit 1; }
echo "$out"
baseline=$(printf '%s\n' "$out" | sed -n 's/.*share \([0-9.]*\)$/\1/p')
[ -n "$baseline" ] || { echo "FAIL: no baseline in: $out"; exit 1; }
launch/ddp_train --model bert-tiny --seq-len 64 --batch-size 16 --steps 700 --optimizer adamw --lr 5e-4 \
  --warmup-steps 20 --threads 2 --seed 1 --eval-data "tensors:$tmp/eval.safetensors" --eval-every 100 \
  --metrics-file "$tmp/metrics.jsonl" --save-weights "$tmp/pretrained.safetensors" > "$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; echo "FAIL: training"; exit 1; }
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
print("pretraining: passed" if ok else "FAIL: pretraining below the bar")
sys.exit(0 if ok else 1)
PY
[ $? -eq 0 ] || exit 1

out=$(tools/make_token_dataset --out "$tmp/classes.safetensors" --samples 256 --seq-len 64 --first-sample 1000000 \
      --seed 1 --classes 4) || { echo "FAIL: make_token_dataset --classes"; exit 1; }
echo "$out"
majority=$(printf '%s\n' "$out" | sed -n 's/.*share \([0-9.]*\)$/\1/p')
launch/ddp_train --model bert-tiny --task classification --num-classes 4 --seq-len 64 --batch-size 16 --steps 150 \
  --optimizer adamw --lr 5e-4 --warmup-steps 10 --threads 2 --seed 1 --load-weights "$tmp/pretrained.safetensors" \
  --eval-data "tensors:$tmp/classes.safetensors" --eval-every 50 --metrics-file "$tmp/finetune.jsonl" \
  > "$tmp/finetune.log" 2>&1 || { cat "$tmp/finetune.log"; echo "FAIL: fine-tuning"; exit 1; }
grep -E "ddp_train:|eval|summary" "$tmp/finetune.log"
grep -q "dropped 9 tensors bert-tiny does not use: cls.predictions.bias" "$tmp/finetune.log" ||
  { echo "FAIL: no line listing the dropped pretraining heads"; exit 1; }
grep -q "initialized 2 new tensors: classifier.weight, classifier.bias" "$tmp/finetune.log" ||
  { echo "FAIL: no line listing the new classifier"; exit 1; }
/usr/bin/python3 - "$tmp/finetune.jsonl" "$majority" <<'PY'
import json, sys
summary = [json.loads(l)["summary"] for l in open(sys.argv[1]) if "summary" in l][-1]
majority, accuracy = float(sys.argv[2]), summary["eval_accuracy"]
print(f"fine-tuned classification: held-out accuracy {accuracy:.4f}, majority class {majority:.4f}")
ok = accuracy >= 0.9 and majority <= 0.5
print("all checks passed" if ok else "FAIL: below the bar")
sys.exit(0 if ok else 1)
PY
