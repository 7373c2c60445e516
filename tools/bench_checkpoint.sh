#!/usr/bin/env bash
# What asynchronous checkpoints cost a run: ResNet-50 (224x224, batch 8,
# SGD) on 2 ranks, with --checkpoint-every 10 against the same run without
# checkpoints, interleaved ROUNDS times (this box moves +-15% run to run).
# Prints the median images/s of each and their ratio, and each
# checkpoint's stall (the time its step blocked: the copy of the state to
# host memory, from the metrics' checkpoint_stall_s) against the median
# step time.
#   bash tools/bench_checkpoint.sh [--rounds 3] [--steps 22] [--model resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 steps=22 model=resnet50
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    *) echo "bench_checkpoint.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
bash tools/install_deps.sh
bazel build //launch:ddp_train >/dev/null 2>&1 || bazel build //launch:ddp_train
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun -np 2 --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
common=(--model "$model" --batch-size 8 --image-size 224 --steps "$steps" --optimizer sgd --threads 1)
for round in $(seq 1 "$rounds"); do
  "${mpi[@]}" bazel-bin/launch/ddp_train "${common[@]}" --metrics-file "$tmp/plain_$round.jsonl" >/dev/null
  rm -rf "$tmp/ckpt"
  "${mpi[@]}" bazel-bin/launch/ddp_train "${common[@]}" --checkpoint-dir "$tmp/ckpt" --checkpoint-every 10 \
    --metrics-file "$tmp/ckpt_$round.jsonl" >/dev/null
  echo "round $round done"
done
python3 - "$tmp" "$rounds" "$model" <<'PY'
import json, statistics, sys
tmp, rounds, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
plain = [load(f"plain_{r}")[-1]["summary"]["samples_per_s"] for r in range(1, rounds + 1)]
ckpt_runs = [load(f"ckpt_{r}") for r in range(1, rounds + 1)]
ckpt = [rs[-1]["summary"]["samples_per_s"] for rs in ckpt_runs]
stalls = [r["checkpoint_stall_s"] for rs in ckpt_runs for r in rs if "checkpoint_stall_s" in r]
steps = [r["step_time_s"] for rs in ckpt_runs for r in rs[2:] if "step_time_s" in r and "checkpoint_stall_s" not in r]
step = statistics.median(steps)
p, c = statistics.median(plain), statistics.median(ckpt)
print(f"{model} 2 ranks, batch 8, 224x224: without checkpoints {p:.2f} images/s, with --checkpoint-every 10 "
      f"{c:.2f} images/s, ratio {c / p:.3f} (median of {rounds} interleaved runs)")
print(f"checkpoint stall: median {statistics.median(stalls):.3f} s, worst {max(stalls):.3f} s, "
      f"against a median step of {step:.3f} s: {100 * max(stalls) / step:.1f}% at worst (bar: under 10%)")
PY
