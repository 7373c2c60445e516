#!/usr/bin/env bash
# What asynchronous checkpoints cost a run: ResNet-50 (224x224, batch 8,
# SGD) on 2 ranks, with --checkpoint-every 10 against the same run without
# checkpoints, interleaved ROUNDS times (this box moves +-15% run to run).
# Prints the median images/s of each and their ratio, and each
# checkpoint's stall (the time its step blocked: the copy of the state to
# host memory, from the metrics' checkpoint_stall_s) against the median
# step time.
#   bash tools/bench/bench_checkpoint.sh [--rounds 3] [--steps 22] [--model resnet50]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
rounds=3 steps=22 model=resnet50
bench_options bench_checkpoint.sh --rounds=rounds --steps=steps --model=model -- "$@"
bench_build //launch:ddp_train
bench_tmp
mpi+=(-np 2)
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
