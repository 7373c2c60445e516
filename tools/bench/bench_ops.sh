#!/usr/bin/env bash
# CPU op throughput, ddp_train against PyTorch on the same shapes and threads.
#   bash tools/bench/bench_ops.sh [--threads 2] [--batch 8] [--repeats 5]
# Prints GFLOP/s of each and the ratio ddp_train / PyTorch. PyTorch runs with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, so the peer is at its best.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
bench_build --with-pytorch //tools/bench:bench_ops
ours=$(bazel-bin/tools/bench/bench_ops "$@")
theirs=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/bench/pytorch/bench_ops.py "$@")
printf '%-24s %-17s %10s %10s %7s\n' op direction ddp_train pytorch ratio
join <(echo "$ours" | awk '{print $2"/"$3, $4}' | sort) <(echo "$theirs" | awk '{print $2"/"$3, $4}' | sort) |
  awk '{split($1, k, "/"); printf "%-24s %-17s %10.1f %10.1f %7.2f\n", k[1], k[2], $2, $3, $2 / $3}'
