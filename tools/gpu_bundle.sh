#!/usr/bin/env bash
# Builds the GPU self-test bundle: a directory that runs on any x86-64 Linux
# machine with an NVIDIA driver, whatever its distribution, and its packed
# form DIR.tar.xz (at most 40 MiB, for the device tool's 64 MiB).
#
#   tools/gpu_bundle.sh DIR
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
#   selftest.sh, env.sh, tools/  the self-test and what it runs
#
# At run time env.sh finds cuDNN, cuBLASLt and NCCL in $DDP_CUDA_LIBS, a
# pip-installed PyTorch's nvidia/*/lib folders (python3), or the CUDA
# toolkit, and the driver's libcuda.so.1 where the host's loader finds it.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: tools/gpu_bundle.sh DIR" >&2; exit 2; }
out=$(realpath -m "$1")
cd "$(dirname "$0")/.."
repo=$(pwd)

targets=(//launch:ddp_train //tests:gpu_tests //tools:gpu_info //tools:make_image_dataset //tools:compare_weights
         //tools:make_image_folder //tools:tokenize_text)
bazel build "${targets[@]}" >&2
programs=(bazel-bin/launch/ddp_train bazel-bin/tests/gpu_tests bazel-bin/tools/gpu_info
          bazel-bin/tools/make_image_dataset bazel-bin/tools/compare_weights bazel-bin/tools/make_image_folder
          bazel-bin/tools/tokenize_text)
for p in bazel-bin/launch/ddp_train bazel-bin/tests/gpu_tests; do
  grep -q libcudart <<< "$(ldd "$p")" || { echo "gpu_bundle.sh: $p was built without CUDA (no nvcc?)" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/libexec" "$out/lib" "$out/tools"

# The MPI runtime: the launcher, its daemon, and its plugins and help files at
# the same places relative to the prefix as on this system (/usr).
mpi_root=/usr/lib/x86_64-linux-gnu/openmpi
pmix_root=/usr/lib/x86_64-linux-gnu/pmix2
mkdir -p "$out/lib/x86_64-linux-gnu"
cp -a "$mpi_root" "$out/lib/x86_64-linux-gnu/openmpi"
rm -rf "$out/lib/x86_64-linux-gnu/openmpi/include" "$out/lib/x86_64-linux-gnu/openmpi/lib/pkgconfig"
rm -f "$out"/lib/x86_64-linux-gnu/openmpi/lib/*.a
[ -d "$pmix_root" ] && cp -a "$pmix_root" "$out/lib/x86_64-linux-gnu/pmix2" && rm -rf "$out/lib/x86_64-linux-gnu/pmix2/include"
mkdir -p "$out/share"
cp -a /usr/share/openmpi "$out/share/openmpi"
[ -d /usr/share/pmix ] && cp -a /usr/share/pmix "$out/share/pmix"
mkdir -p "$out/etc"
[ -d /etc/openmpi ] && cp -a /etc/openmpi "$out/etc/openmpi"

for p in "${programs[@]}"; do install -m 755 "$p" "$out/libexec/"; done
install -m 755 "$(readlink -f /usr/bin/orterun)" "$out/libexec/orterun"
install -m 755 "$(readlink -f /usr/bin/orted)" "$out/libexec/orted"
strip --strip-unneeded "$out"/libexec/*

# Libraries left to the host: the driver, and the CUDA libraries that are
# large and that a CUDA install or PyTorch's wheels bring.
host_only='^(libcuda\.so|libnvidia-|libcudnn|libcublas|libcublasLt|libnccl|linux-vdso)'
declare -A seen=()
copy_deps() {  # copy_deps ELF...: their shared libraries, recursively, into lib/
  local f lib path
  for f in "$@"; do
    while read -r lib path; do
      [ -n "$path" ] || continue
      [[ "$lib" =~ $host_only ]] && continue
      [ -n "${seen[$lib]:-}" ] && continue
      seen[$lib]=1
      cp -L "$path" "$out/lib/$lib"
      chmod u+w "$out/lib/$lib"
      copy_deps "$path"
    done < <(ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $1, $3}')
  done
}
plugins=$(find "$out/lib/x86_64-linux-gnu" -name '*.so*' -type f)
# shellcheck disable=SC2086
copy_deps "$out"/libexec/* $plugins
# The loader, and the libc pieces loaded by name at run time (name service).
cp -L /lib64/ld-linux-x86-64.so.2 "$out/lib/ld-linux-x86-64.so.2"
for extra in libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
  [ -e "/lib/x86_64-linux-gnu/$extra" ] && cp -L "/lib/x86_64-linux-gnu/$extra" "$out/lib/$extra"
done
find "$out/lib" -maxdepth 1 -name '*.so*' -type f -exec strip --strip-unneeded {} + 2>/dev/null || true

# Wrappers: every program runs through the bundled loader with the bundle's
# library path (env.sh), so it needs nothing from the host but the kernel,
# the NVIDIA driver and the CUDA libraries env.sh finds.
install -m 644 tools/bundle/env.sh "$out/env.sh"
for name in ddp_train gpu_tests gpu_info make_image_dataset compare_weights make_image_folder tokenize_text orterun orted; do
  cat > "$out/bin/$name" <<EOF
#!/bin/sh
B=\$(cd "\$(dirname "\$0")/.." && pwd)
. "\$B/env.sh"
exec "\$B/lib/ld-linux-x86-64.so.2" --library-path "\$DDP_BUNDLE_LIBRARY_PATH" "\$B/libexec/$name" "\$@"
EOF
  chmod 755 "$out/bin/$name"
done
ln -s orterun "$out/bin/mpirun"
ln -s orterun "$out/bin/mpiexec"

install -m 755 tools/bundle/selftest.sh "$out/selftest.sh"
install -m 644 tests/compare_losses.py tools/bench_resnet_pytorch.py tools/check_bert_interop.py tools/bench_bert_pytorch.py \
  tools/check_tokenizer.py \
  tests/golden/bert_state_dict_manifest.json "$out/tools/"
git -C "$repo" rev-parse HEAD > "$out/VERSION" 2>/dev/null || echo unknown > "$out/VERSION"
"$out/bin/gpu_info" > "$out/built_versions.json" || true  # built-against versions (exit 3 here: no GPU)

tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
size=$(stat -c %s "$out.tar.xz")
echo "gpu_bundle.sh: $out ($(du -sh "$out" | cut -f1)), packed $out.tar.xz: $((size / 1048576)) MiB"
[ "$size" -le $((40 * 1048576)) ] || { echo "gpu_bundle.sh: the packed bundle exceeds 40 MiB" >&2; exit 1; }
