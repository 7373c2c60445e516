#!/usr/bin/env bash
# Installs the Debian 12 packages that ddp_train builds and tests with.
# Idempotent and quiet: when everything is present it does nothing.
#
#   tools/install_deps.sh                 # build and test dependencies
#   tools/install_deps.sh --with-pytorch  # also OpenBLAS's threaded build, for benchmarking PyTorch
#   tools/install_deps.sh --with-slurm    # also Slurm, for the srun launch test (CI)
#
# The CUDA 13 toolkit (cuDNN, cuBLASLt, NCCL) is not a Debian package: where
# /usr/local/cuda/bin/nvcc exists the build uses it, elsewhere it builds for
# CPU only.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms bazel-rules-java  # Bazel 4.2.3 and the repositories it would fetch
  g++ python3
  libdnnl-dev                                       # oneDNN: CPU convolution and GEMM
  openmpi-bin libopenmpi-dev                        # CPU ranks and bootstrap
  protobuf-compiler libprotobuf-dev                 # TrainConfig, checkpoint manifests
  zlib1g-dev                                        # checkpoint checksums (CRC-32)
  libjpeg62-turbo-dev libpng-dev                    # imagefolder:DIR decoding
  libicu-dev                                        # tools/tokenize_text (BERT's tokenizer)
  python3-crc32c                                    # the tests' independent TensorBoard reader
  python3-torch python3-torchvision                 # the peer of the self-test's rehearsed benchmarks (CPU)
  gnuplot-nox                                       # tools/scaling/scaling_study's plot
  iproute2                                          # shaped-link test hosts (ip netns, tc tbf)
  procps                                            # pgrep, ps, pkill: the preemption and Slurm tests
  xz-utils                                          # tools/gpu/gpu_bundle.sh packs with tar -J
  libgoogle-glog-dev libgflags-dev libgtest-dev nlohmann-json3-dev
)
for arg in "$@"; do
  case "$arg" in
    --with-pytorch) packages+=(libopenblas0-pthread) ;;
    # Slurm's daemons, for tests/slurm_launch_test.sh (which starts its own
    # throwaway cluster). Opt-in: Debian enables their system services.
    --with-slurm) packages+=(slurmctld slurmd slurm-client) ;;
    *) echo "install_deps.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps.sh: run as root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install_deps.sh: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
