#!/usr/bin/env bash
# DESIGN.md's equivalence contract for BERT, dropout on: N ranks at batch B
# give the per-step losses, evaluation (MLM accuracy on a held-out file)
# and final weights of one rank at batch B with N accumulated
# micro-batches. Dropout masks depend on the sample's place in the global
# batch, never on the rank, so at 2 ranks (one addition per sum) this is
# bit for bit, for ZeRO stages 0, 1, 2 and 3; at 4 ranks the ring sums in
# another order: within 1e-4 (losses) and 1e-5 (weights). Dropout must
# matter (the run without it differs), or the check would prove nothing.
set -u
bin=launch/ddp_train
source tests/lib.sh

tools/make_token_dataset --out "$tmp/eval.safetensors" --samples 12 --seq-len 32 --first-sample 1000000 || exit 1
common=(--model bert-tiny --seq-len 32 --batch-size 3 --steps 3 --optimizer adamw --lr 1e-3 --weight-decay 0.01
        --nodecay-bn-bias --dropout 0.1 --threads 1 --seed 3 --bucket-mb 4 --first-bucket-mb 0.5
        --eval-data "tensors:$tmp/eval.safetensors" --eval-every 2)
same() {  # same A B LOSS_RTOL WEIGHT_RTOL [COMPARE_WEIGHTS_ARGS...]
  local a="$1" b="$2" loss_rtol="$3" weight_rtol="$4"; shift 4
  /usr/bin/python3 tests/compare_losses.py "$tmp/$a.jsonl" "$tmp/$b.jsonl" --rtol "$loss_rtol" --steps 3 ||
    fail "losses of $a and $b differ"
  tools/compare_weights "$tmp/$a.safetensors" "$tmp/$b.safetensors" --rtol "$weight_rtol" "$@" ||
    fail "weights of $a and $b differ"
}

one one2 --accumulation-steps 2
for stage in 0 1 2 3; do
  many "two_zero$stage" 2 --zero-stage "$stage"
  echo "2 ranks, ZeRO $stage, vs 1 rank with 2 micro-batches:"; same one2 "two_zero$stage" 0 0
done
one one4 --accumulation-steps 4
many four 4
# The key projection's bias has an exactly zero gradient (softmax ignores a
# constant added to a query's every score): its gradient is rounding noise,
# which Adam's normalization turns into steps of +-lr whose signs follow the
# summation order. Every other tensor is compared.
echo "4 ranks vs 1 rank with 4 micro-batches:"; same one4 four 1e-4 1e-5 --exclude attention.self.key.bias
one one2_nodropout --accumulation-steps 2 --dropout 0
/usr/bin/python3 tests/compare_losses.py "$tmp/one2.jsonl" "$tmp/one2_nodropout.jsonl" --rtol 0 >/dev/null &&
  fail "--dropout 0.1 left every loss unchanged"
grep -q '"eval_accuracy"' "$tmp/two_zero0.jsonl" || fail "no evaluation in the 2-rank run"

finish --pass "all checks passed"
