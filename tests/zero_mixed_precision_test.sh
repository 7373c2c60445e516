#!/usr/bin/env bash
# ZeRO under bf16 mixed precision, 2 ranks under a real mpirun: stages 1, 2
# and 3 follow stage 0 bit for bit (losses and every saved tensor), with f32
# gradients on the wire and with bf16 compression of the reduce-scatter
# (--grad-compression bf16; at 2 ranks each sum is one addition, so the order
# cannot differ). The parameter gather carries the bf16 weight copy (batch
# norm and biases in f32 beside it) by default, and f32 with
# --zero-gather-dtype fp32: both give the same bits, the saved weights
# included (the f32 master weights are gathered before saving). With bf16
# gathers each rank keeps only its pieces of the f32 master weights; stage
# 3 gathers each bucket in bf16 as a layer reads it (f32 gathers refused).
# Compression must change the result (it is not a no-op), and
# --grad-compression auto under bf16 must mean bf16.
set -u
bin=launch/ddp_train
source tests/lib.sh

resnet18_data 48
common=("${resnet18_flags[@]}" --steps 3
        --batch-size 4 --zero-init-residual --threads 1 --seed 7 --bucket-mb 4 --first-bucket-mb 0.3 --precision bf16
        --optimizer sgd --lr 0.02 --momentum 0.9 --eval-data "tensors:$tmp/data.safetensors" --eval-every 1)
run() {  # run NAME ARGS...
  local name="$1"; shift
  timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" "$@" \
    --metrics-file "$tmp/$name.jsonl" --save-weights "$tmp/$name.safetensors" > "$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; fail "$name"; }
}
same() {  # same A B
  /usr/bin/python3 tests/compare_losses.py "$tmp/$1.jsonl" "$tmp/$2.jsonl" --rtol 0 || fail "losses of $1 and $2 differ"
  tools/compare_weights "$tmp/$1.safetensors" "$tmp/$2.safetensors" --rtol 0 || fail "weights of $1 and $2 differ"
}
# A CPU without AVX-512 BF16 trains --precision bf16 in f32 (and says so):
# nothing here to test, which the summary counts as a skip.
run probe --zero-stage 0 --steps 1
if grep -q "this CPU lacks AVX-512 BF16" "$tmp/probe.log"; then
  source tests/report_skip.sh
  report_skip ZeroMixedPrecision StagesFollowStageZeroInBf16 "this CPU lacks AVX-512 BF16: --precision bf16 trains in f32"
  exit 0
fi
for wire in none bf16; do
  for stage in 0 1 2 3; do run "zero${stage}_$wire" --zero-stage "$stage" --grad-compression "$wire"; done
  for stage in 1 2 3; do echo "stage $stage vs 0, --grad-compression $wire:"; same "zero0_$wire" "zero${stage}_$wire"; done
done
/usr/bin/python3 tests/compare_losses.py "$tmp/zero0_none.jsonl" "$tmp/zero0_bf16.jsonl" --rtol 0 >/dev/null &&
  fail "bf16 compression left every loss unchanged"
for stage in 1 2; do
  run "zero${stage}_gather_f32" --zero-stage "$stage" --grad-compression none --zero-gather-dtype fp32
  echo "stage $stage, bf16 gather vs f32 gather:"; same "zero${stage}_none" "zero${stage}_gather_f32"
  grep -q '"zero_gather_dtype":"bf16"' "$tmp/zero${stage}_none.jsonl" || fail "stage $stage did not gather bf16"
  grep -q '"zero_gather_dtype":"f32"' "$tmp/zero${stage}_gather_f32.jsonl" || fail "stage $stage did not gather f32"
done
# The memory record: with bf16 gathers each rank keeps half the f32 master
# weights (its pieces, padded), and at stages 1 and 2 the working copy
# holds, beside the bf16 weights, the f32 values the forward reads (batch
# norm's); stage 3 holds no whole working copy; with f32 gathers the
# masters stay whole.
/usr/bin/python3 - "$tmp" <<'PY' || fail "the memory record of sharded master weights"
import json, sys
def memory(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")][-1]["summary"]["memory"]
m0 = memory("zero0_none")
p, copy = m0["param_bytes"], m0["low_precision_bytes"]
padding = 4 * 64  # at most an element padded in each of 64 buckets
for stage in (1, 2, 3):
    m = memory(f"zero{stage}_none")
    print(f"stage {stage}: f32 masters {m['param_bytes']} of {p} bytes; working copy {m['low_precision_bytes']}")
    assert 0 <= m["param_bytes"] - p // 2 <= padding, f"stage {stage} keeps {m['param_bytes']} master bytes"
    if stage == 3:
        assert m["low_precision_bytes"] == 0, "stage 3's working copy"
        continue
    assert copy < m["low_precision_bytes"] < copy + p // 10, f"stage {stage}'s working copy"
    f = memory(f"zero{stage}_gather_f32")
    assert f["param_bytes"] == p and f["low_precision_bytes"] == copy, f"stage {stage} with f32 gathers"
PY
run auto --zero-stage 1
echo "--grad-compression auto under bf16 vs bf16:"; same zero1_bf16 auto
grep -q '"compute_dtype":"bf16"' "$tmp/zero1_bf16.jsonl" || fail "did not train in bf16"
finish --pass PASS
