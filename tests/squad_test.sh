#!/usr/bin/env bash
# SQuAD end to end on learnable data: SQuAD JSON generated from Debian's
# license texts (tests/make_squad_json.py: each question names a phrase of
# its paragraph, the answer is that phrase where it stands), through
# tools/make_squad_tensors, bert-tiny question answering trained from
# scratch on 2 ranks, the final evaluation's --predictions-file and
# --squad-eval-file, and tools/squad_eval. Bars: exact match at least 3x the
# trivial baseline's (the context's first n words, n the answer's length)
# and at least 10, F1 at least 50; squad_eval's figures equal the summary's.
set -u
source tests/lib.sh
baseline=$(/usr/bin/python3 tests/make_squad_json.py "$tmp") || { echo "FAIL: make_squad_json.py"; exit 1; }
echo "$baseline"
for set in train dev; do
  extra=()
  [ "$set" = dev ] && extra=(--eval)
  tools/make_squad_tensors --vocab "$tmp/vocab.txt" --squad "$tmp/$set.json" --seq-len 128 --doc-stride 32 \
    --max-query-len 16 "${extra[@]}" --out "$tmp/$set.safetensors" || { echo "FAIL: make_squad_tensors $set"; exit 1; }
done
timeout 900 mpirun -np 2 --oversubscribe --bind-to none launch/ddp_train --model bert-tiny --task question-answering \
  --data "tensors:$tmp/train.safetensors" --eval-data "tensors:$tmp/dev.safetensors" --seq-len 128 \
  --batch-size 16 --steps 1000 --optimizer adamw --lr 2e-3 --warmup-steps 50 --lr-schedule linear --threads 1 \
  --seed 1 --log-every 200 --metrics-file "$tmp/metrics.jsonl" --predictions-file "$tmp/predictions.tsv" \
  --squad-eval-file "$tmp/dev.json" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; echo "FAIL: training"; exit 1; }
grep -E "step|summary" "$tmp/train.log"
scored=$(tools/squad_eval --squad "$tmp/dev.json" --features "$tmp/dev.safetensors" \
         --predictions "$tmp/predictions.tsv") || { echo "FAIL: squad_eval: $scored"; exit 1; }
echo "squad_eval: $scored"
/usr/bin/python3 - "$tmp/metrics.jsonl" "$scored" "$baseline" <<'PY'
import json, sys
summary = [json.loads(l)["summary"] for l in open(sys.argv[1]) if '"summary"' in l][-1]
scored = json.loads(sys.argv[2])
words = sys.argv[3].split()
base_em, base_f1 = float(words[words.index("exact_match") + 1]), float(words[words.index("f1") + 1])
em, f1 = scored["exact_match"], scored["f1"]
print(f"exact match {em:.2f} (baseline {base_em:.2f}), F1 {f1:.2f} (baseline {base_f1:.2f})")
ok = True
if abs(summary["squad_exact_match"] - em) > 1e-3 or abs(summary["squad_f1"] - f1) > 1e-3:
    print(f"FAIL: the summary's EM/F1 {summary['squad_exact_match']}/{summary['squad_f1']} differ from squad_eval's")
    ok = False
if not (em >= 3 * base_em and em >= 10 and f1 >= 50):
    print("FAIL: below the bar (EM >= 3x the baseline and >= 10, F1 >= 50)")
    ok = False
print("all checks passed" if ok else "some checks failed")
sys.exit(0 if ok else 1)
PY
