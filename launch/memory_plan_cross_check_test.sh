#!/usr/bin/env bash
# The memory planner against real CPU runs: for ResNet-18 at 64x64 and
# bert-tiny at sequence length 64, fp32, with and without activation
# checkpointing, ZeRO 0 and 2 on one rank and two, ZeRO 1 and 3 on two
# (one rank has nothing to shard), the plan's peak of tensor
# memory (--device meta --plan-device cpu, one process planning rank 0 of
# --plan-world-size ranks) must be within 1% of the allocator's peak that a
# real run of rank 0 reports in its summary. Exact, in practice: a plan
# allocates what the step allocates.
#   memory_plan_cross_check_test.sh [large]
# "large": ResNet-50 at 224x224 and bert-base at sequence length 128 (the
# README's figures; minutes).
set -u
bin="launch/ddp_train"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# field FILE KEY...: a number from the last JSON record of FILE.
field() {
  python3 - "$@" <<'PY'
import json, sys
record = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for key in sys.argv[2:]:
    record = record[key]
print(record)
PY
}

if [ "${1:-}" = large ]; then
  resnet=(--model resnet50 --image-size 224 --batch-size 4)
  bert=(--model bert-base --seq-len 128 --batch-size 4)
else
  resnet=(--model resnet18 --image-size 64 --num-classes 10 --batch-size 4)
  bert=(--model bert-tiny --seq-len 64 --batch-size 4)
fi
for model in resnet bert; do
  declare -n shape="$model"
  for checkpointing in noactivation_checkpointing activation_checkpointing; do
    for zero in 0 1 2 3; do
      for np in 1 2; do
        [ "$np" -eq 1 ] && [ $((zero % 2)) -eq 1 ] && continue
        name="$model-$checkpointing-zero$zero-np$np"
        flags=("${shape[@]}" --"$checkpointing" --zero-stage "$zero" --optimizer adamw --threads 1)
        if ! out=$(timeout 300 mpirun --oversubscribe -np "$np" "$bin" "${flags[@]}" --device cpu --steps 2 \
                   --metrics-file "$tmp/$name.real.jsonl" 2>&1); then
          fail "$name: real run: $out"; continue
        fi
        if ! out=$(timeout 120 "$bin" "${flags[@]}" --device meta --plan-device cpu --plan-world-size "$np" \
                   --metrics-file "$tmp/$name.plan.jsonl" 2>&1); then
          fail "$name: plan: $out"; continue
        fi
        real=$(field "$tmp/$name.real.jsonl" summary memory peak_bytes)
        planned=$(field "$tmp/$name.plan.jsonl" plan peak_bytes)
        if python3 -c "import sys; r, p = $real, $planned; sys.exit(0 if abs(p - r) <= 0.01 * r else 1)"; then
          echo "ok: ${shape[1]}-$checkpointing-zero$zero-np$np: real peak $real bytes, planned $planned"
        else
          fail "$name: real peak $real bytes, planned $planned (more than 1% apart)"
        fi
      done
    done
  done
done
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all plans within 1% of the real runs"
