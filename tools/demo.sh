#!/usr/bin/env bash
# Quick start, first command: installs what is missing, builds ddp_train and
# trains ResNet-50 for 20 steps on learnable synthetic 224x224 images (10
# classes), printing loss, step time and images/s, then a summary. Extra
# arguments go to ddp_train and override these.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bazel build //launch:ddp_train
bazel-bin/launch/ddp_train --model resnet50 --steps 20 --num-classes 10 --lr 0.005 --warmup-steps 3 \
  --zero-init-residual "$@"
