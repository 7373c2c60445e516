#!/usr/bin/env bash
# Quick start, first command: installs what is missing, builds ddp_train and
# runs a short training job on synthetic data. Extra arguments go to ddp_train.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bazel build //launch:ddp_train
bazel-bin/launch/ddp_train --steps 30 "$@"
