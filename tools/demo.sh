#!/usr/bin/env bash
# Quick start, first command: installs what is missing, builds ddp_train and
# trains ResNet-50 data-parallel on 2 ranks under mpirun for 20 steps, on
# learnable synthetic 224x224 images (10 classes): loss, step time, images/s
# and exposed communication per step, then a summary. Extra arguments go to
# ddp_train and override these; DDP_RANKS sets the number of ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bazel build //launch:ddp_train
mpi_flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
mpirun -np "${DDP_RANKS:-2}" "${mpi_flags[@]}" bazel-bin/launch/ddp_train --model resnet50 --steps 20 \
  --num-classes 10 --lr 0.005 --warmup-steps 3 --zero-init-residual --log-every 1 "$@"
