#!/usr/bin/env bash
# The memory planner's tables: the largest per-rank batch that fits a 24 GB
# card (--plan-memory 24GiB, planning a CUDA rank with the default 1 GiB
# overhead) for BERT-Large on SQuAD at sequence length 384 (AdamW) and
# ResNet-50 at 224x224 (SGD), by precision, activation checkpointing and
# ZeRO at 4 ranks; published PyTorch batches on an RTX 4090 beside BERT's. Markdown, in
# the README's form. Each plan takes seconds on a CPU.
#   bash tools/bench/plan_memory.sh [--memory 24GiB]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
memory=24GiB
bench_options plan_memory.sh --memory=memory -- "$@"
bench_build //launch:ddp_train
bench_tmp

# row LABEL SEED FLAGS...: one table row from one plan.
row() {
  local label="$1" seed="$2"; shift 2
  bazel-bin/launch/ddp_train "$@" --plan-memory "$memory" --metrics-file "$tmp/plan.json" >/dev/null
  python3 - "$tmp/plan.json" "$label" "$seed" <<'PY'
import json, sys
plan = json.loads(open(sys.argv[1]).read())["plan"]
rows = plan["rows_bytes"]
gib = lambda b: f"{b / 2**30:.2f}"
state = rows["parameters"] + rows["low_precision_copy"] + rows["gradients"] + rows["optimizer_state"] + rows["collectives"]
print(f"| {sys.argv[2]} | {plan['largest_batch']} | {sys.argv[3]} | {gib(state)} | "
      f"{plan['activation_per_sample_bytes'] / 2**20:.1f} | {gib(rows['workspace'])} | "
      f"{gib(plan['peak_bytes'])} | {plan['seconds']:.2f} |")
PY
}

header() {
  echo "| $1 | largest batch | $2 | model state GiB | activations MiB a sample | workspace GiB | tensors at the peak GiB | plan s |"
  echo "|---|---|---|---|---|---|---|---|"
}

bert=(--model bert-large --task question-answering --seq-len 384 --optimizer adamw)
echo "BERT-Large, SQuAD, sequence 384, AdamW, one rank's memory on a $memory card:"
echo
header "BERT-Large seq 384" "PyTorch on an RTX 4090 (published)"
row "fp32" 24 "${bert[@]}" --precision fp32
row "fp16" 48 "${bert[@]}" --precision fp16
row "fp16 + checkpointing" 96 "${bert[@]}" --precision fp16 --activation_checkpointing
row "bf16" "" "${bert[@]}" --precision bf16
row "bf16 + checkpointing" "" "${bert[@]}" --precision bf16 --activation_checkpointing
row "fp16, ZeRO-1, 4 ranks" "" "${bert[@]}" --precision fp16 --zero-stage 1 --plan-world-size 4
row "fp16, ZeRO-2, 4 ranks" "" "${bert[@]}" --precision fp16 --zero-stage 2 --plan-world-size 4
row "fp16 + checkpointing, ZeRO-2, 4 ranks" "" "${bert[@]}" --precision fp16 --activation_checkpointing \
  --zero-stage 2 --plan-world-size 4
row "fp32, ZeRO-3, 4 ranks" "" "${bert[@]}" --precision fp32 --zero-stage 3 --plan-world-size 4
row "fp32, ZeRO-3, 8 ranks" "" "${bert[@]}" --precision fp32 --zero-stage 3 --plan-world-size 8
row "fp16, ZeRO-3, 4 ranks" "" "${bert[@]}" --precision fp16 --zero-stage 3 --plan-world-size 4
row "fp16, ZeRO-3, 8 ranks" "" "${bert[@]}" --precision fp16 --zero-stage 3 --plan-world-size 8
echo
resnet=(--model resnet50 --image-size 224 --optimizer sgd)
echo "ResNet-50, 224x224, SGD with momentum, one rank's memory on a $memory card:"
echo
header "ResNet-50 224²" "PyTorch on an RTX 4090 (published)"
row "fp32" "" "${resnet[@]}" --precision fp32
row "fp16" "" "${resnet[@]}" --precision fp16
row "fp16 + checkpointing" "" "${resnet[@]}" --precision fp16 --activation_checkpointing
row "bf16" "" "${resnet[@]}" --precision bf16
row "fp16, ZeRO-1, 4 ranks" "" "${resnet[@]}" --precision fp16 --zero-stage 1 --plan-world-size 4
row "fp16, ZeRO-2, 4 ranks" "" "${resnet[@]}" --precision fp16 --zero-stage 2 --plan-world-size 4
