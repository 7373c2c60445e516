#!/usr/bin/env bash
# ZeRO memory and step-time report: for N = 1, 2, 4 ranks and each stage,
# rank 0's measured persistent bytes (parameters + gradients + optimizer
# state, from the metrics summary) beside the fp32 theory for AdamW, and the
# step time against stage 0 at the same N, all in one run.
#   bash tools/bench/bench_zero.sh [--model resnet50] [--ranks "1 2 4"] [--stages "0 1 2 3"] [--steps 4]
# ResNets train at 64x64, BERTs at sequence length 128, batch 2 a rank.
# Theory (Ψ parameters): stage 0 16Ψ; stage 1 8Ψ + 8Ψ/N; stage 2 4Ψ + 12Ψ/N;
# stage 3 16Ψ/N. The gradient bucket pool of stages 2 and 3 (3 buffers) and
# stage 3's gathered parameter buckets (the most held at once) are reported
# separately. The stages must start with 0: its run gives Ψ and the base
# step time.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
model=resnet50 ranks="1 2 4" steps=4 stages="0 1 2"
bench_options bench_zero.sh --model=model --ranks=ranks --stages=stages --steps=steps -- "$@"
[ "${stages%% *}" = 0 ] || { echo "bench_zero.sh: --stages must start with 0, got '$stages'" >&2; exit 2; }
shape=(--image-size 64)
[[ "$model" == bert* ]] && shape=(--seq-len 128)
bench_build //launch:ddp_train
bench_tmp
printf '%-3s %-6s %14s %14s %8s %14s %14s %10s %10s %10s\n' N stage measured theory ratio "bucket pool" gathered \
  "step s" "vs stage 0" "exposed s"
for n in $ranks; do
  for stage in $stages; do
    "${mpi[@]}" -np "$n" bazel-bin/launch/ddp_train --model "$model" --optimizer adamw --lr 1e-4 \
      "${shape[@]}" --batch-size 2 --steps "$steps" --threads 1 --zero-stage "$stage" \
      --metrics-file "$tmp/m.jsonl" >/dev/null
    python3 - "$tmp/m.jsonl" "$n" "$stage" "$tmp/base_$n" <<'PY'
import json, os, statistics, sys
path, n, stage, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
records = [json.loads(line) for line in open(path)]
s = records[-1]["summary"]
m = s["memory"]
measured = m["param_bytes"] + m["grad_bytes"] + m["optimizer_bytes"]
step = statistics.median(r["step_time_s"] for r in records[2:-1]) if len(records) > 3 else records[-2]["step_time_s"]
if stage == 0:
    open(base, "w").write(f"{step} {m['param_bytes'] / 4}")
base_step, psi = (float(x) for x in open(base).read().split())
theory = {0: 16 * psi, 1: 8 * psi + 8 * psi / n, 2: 4 * psi + 12 * psi / n, 3: 16 * psi / n}[stage if n > 1 else 0]
print(f"{n:<3} {stage:<6} {measured / 2**20:11.1f} MiB {theory / 2**20:11.1f} MiB {measured / theory:8.3f} "
      f"{m.get('transient_bucket_bytes', 0) / 2**20:10.1f} MiB "
      f"{m.get('gathered_parameter_peak_bytes', 0) / 2**20:10.1f} MiB {step:10.3f} {step / base_step:10.2f} "
      f"{s.get('exposed_comm_s', 0.0):10.3f}")
PY
  done
done
echo "measured: rank 0's parameter + gradient (padded bucket buffers) + optimizer bytes; theory in fp32 for AdamW"
echo "exposed: seconds per step the compute thread waited on communication (ZeRO: reduce-scatters, and the"
echo "next forward's waits for the parameter all-gather)"
