#!/usr/bin/env bash
# ZeRO's bytes per parameter, ddp_train's planner against the ZeRO paper
# (Rajbhandari et al., 2020; f32 gradients under mixed precision, as
# Megatron's distributed optimizer keeps them): one rank's model state
# (parameters, 16-bit copy, gradients, optimizer state, buffers, the
# collectives' buffers) over the parameter count, AdamW, planned for a GPU
# rank, for BERT-Large on SQuAD at sequence 384 and ResNet-50 at 224x224,
# at 1, 4 and 8 ranks. Markdown. Each plan takes a second on a CPU.
#   bash tools/bench/bytes_per_parameter.sh [--precision fp32|fp16]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
precision=fp32
bench_options bytes_per_parameter.sh --precision=precision -- "$@"
bench_build //launch:ddp_train
bench_tmp

# cell MODEL_FLAGS... : "ddp_train (paper)" for one stage and world size.
cell() {
  local stage="$1" world="$2"; shift 2
  if ! bazel-bin/launch/ddp_train "$@" --optimizer adamw --precision "$precision" --device meta --plan-device cuda \
      --plan-world-size "$world" --zero-stage "$stage" --batch-size 1 --metrics-file "$tmp/plan.json" \
      >/dev/null 2>"$tmp/err"; then
    echo -n "refused"
    return
  fi
  python3 - "$tmp/plan.json" "$stage" "$world" "$precision" <<'PY'
import json, sys
plan = json.loads(open(sys.argv[1]).read())["plan"]
rows = plan["rows_bytes"]
stage, n, half = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] != "fp32"
state = sum(rows[k] for k in ("parameters", "low_precision_copy", "gradients", "optimizer_state", "buffers", "collectives"))
params = plan["parameter_count"]
if half:
    paper = [18, 6 + 12 / n, 2 + 16 / n, 18 / n][stage]
else:
    paper = [16, 8 + 8 / n, 4 + 12 / n, 16 / n][stage]
print(f"{state / params:.2f} ({paper:.3g})", end="")
PY
}

table() {
  local label="$1"; shift
  echo "| $label, $precision | 1 rank | 4 ranks | 8 ranks |"
  echo "|---|---|---|---|"
  for stage in 0 1 2 3; do
    echo -n "| stage $stage"
    for world in 1 4 8; do
      if [ "$world" = 1 ] && [ "$stage" != 0 ]; then echo -n " | —"; continue; fi
      echo -n " | $(cell "$stage" "$world" "$@")"
    done
    echo " |"
  done
}

echo "Bytes per parameter of one rank's model state: ddp_train's plan (the ZeRO paper's count)."
echo
table "BERT-Large QA, seq 384" --model bert-large --task question-answering --seq-len 384
echo
table "ResNet-50, 224x224" --model resnet50 --image-size 224
