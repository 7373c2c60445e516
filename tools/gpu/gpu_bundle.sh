#!/usr/bin/env bash
# Builds the GPU self-test bundle: a directory that runs on any x86-64 Linux
# machine with an NVIDIA driver, whatever its distribution, and its packed
# form DIR.tar.xz (at most 40 MiB, so it travels where uploads are capped at 64 MiB).
#
#   tools/gpu/gpu_bundle.sh DIR
#
# DIR holds:
#   bin/       wrappers: ddp_train, gpu_tests, gpu_info, make_image_dataset,
#              compare_weights, make_image_folder, tokenize_text, mpirun (and
#              orterun, orted)
#   libexec/   the stripped programs
#   lib/       every shared library they need except the NVIDIA driver and the
#              large CUDA libraries (cuDNN, cuBLAS/cuBLASLt, NCCL), glibc and
#              its loader included: each wrapper starts its program through
#              the bundled loader, so the host's C library does not matter
#   lib/x86_64-linux-gnu/openmpi, share/openmpi, lib/x86_64-linux-gnu/pmix2:
#              Open MPI's components and help files, relocated (OPAL_PREFIX)
#   selftest.sh, env.sh, tools/  the self-test (tools/selftest.py) and what it runs
#
# tools/gpu/bundle/pack.sh makes the directory from the built programs; this
# script builds them, packs, and compresses.
#
# At run time env.sh finds cuDNN, cuBLASLt and NCCL in $DDP_CUDA_LIBS, a
# pip-installed PyTorch's nvidia/*/lib folders (python3), or the CUDA
# toolkit, and the driver's libcuda.so.1 where the host's loader finds it.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: tools/gpu/gpu_bundle.sh DIR" >&2; exit 2; }
out=$(realpath -m "$1")
cd "$(dirname "$0")/../.."

targets=(//launch:ddp_train //tests:gpu_tests //tools:gpu_info //tools:make_image_dataset //tools:compare_weights
         //tools:make_image_folder //tools:tokenize_text)
bazel build "${targets[@]}" >&2
programs=(bazel-bin/launch/ddp_train bazel-bin/tests/gpu_tests bazel-bin/tools/gpu_info
          bazel-bin/tools/make_image_dataset bazel-bin/tools/compare_weights bazel-bin/tools/make_image_folder
          bazel-bin/tools/tokenize_text)
for p in bazel-bin/launch/ddp_train bazel-bin/tests/gpu_tests; do
  grep -q libcudart <<< "$(ldd "$p")" || { echo "gpu_bundle.sh: $p was built without CUDA (no nvcc?)" >&2; exit 1; }
done

bash tools/gpu/bundle/pack.sh "$out" "${programs[@]}"

tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
size=$(stat -c %s "$out.tar.xz")
echo "gpu_bundle.sh: $out ($(du -sh "$out" | cut -f1)), packed $out.tar.xz: $((size / 1048576)) MiB"
[ "$size" -le $((40 * 1048576)) ] || { echo "gpu_bundle.sh: the packed bundle exceeds 40 MiB" >&2; exit 1; }
