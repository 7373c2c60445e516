#!/usr/bin/env bash
# Packs the self-test bundle's directory from programs already built
# (tools/gpu/gpu_bundle.sh builds them first, then packs and compresses; the
# rehearsal test packs from its runfiles). Run from anywhere; repository
# files are taken relative to this script.
#
#   tools/gpu/bundle/pack.sh OUT PROGRAM...
#
# OUT gets bin/ (wrappers), libexec/ (the stripped programs), lib/ (every
# shared library they need but the NVIDIA driver and the large CUDA
# libraries, glibc and its loader included), Open MPI's relocated runtime,
# selftest.sh, env.sh and tools/ (see tools/gpu/gpu_bundle.sh).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: tools/gpu/bundle/pack.sh OUT PROGRAM..." >&2; exit 2; }
out=$(realpath -m "$1")
shift
programs=()
for p in "$@"; do programs+=("$(realpath "$p")"); done
cd "$(dirname "$0")/../../.."
repo=$(pwd)
# OUT is made anew: it may hold none of the programs, nor this repository.
for p in "${programs[@]}" "$repo"; do
  case "$p/" in
    "$out"/*) echo "pack.sh: OUT $out holds $p, which making it anew would delete; choose another OUT" >&2; exit 2 ;;
  esac
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
# hwloc's PCI plugin (device locality); its other plugins pull in X11 and
# ICU, and hwloc runs without them.
hwloc_pci=/usr/lib/x86_64-linux-gnu/hwloc/hwloc_pci.so
[ -e "$hwloc_pci" ] && mkdir -p "$out/lib/x86_64-linux-gnu/hwloc" && cp -L "$hwloc_pci" "$out/lib/x86_64-linux-gnu/hwloc/"
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
install -m 644 tools/gpu/bundle/env.sh "$out/env.sh"
# orterun started by an absolute path acts as if given --prefix: it would
# put the bundle's lib/ (glibc among them) on the LD_LIBRARY_PATH of what it
# starts, and a host's /bin/sh, which starts each wrapper, would then load
# the bundled glibc and fail. --noprefix: the ranks get the environment as
# env.sh made it.
for name in $(for p in "${programs[@]}"; do basename "$p"; done) orterun orted; do
  extra=""
  [ "$name" = orterun ] && extra=" --noprefix"
  cat > "$out/bin/$name" <<EOF
#!/bin/sh
B=\$(cd "\$(dirname "\$0")/.." && pwd)
. "\$B/env.sh"
exec "\$B/lib/ld-linux-x86-64.so.2" --library-path "\$DDP_BUNDLE_LIBRARY_PATH" "\$B/libexec/$name"$extra "\$@"
EOF
  chmod 755 "$out/bin/$name"
done
ln -s orterun "$out/bin/mpirun"
ln -s orterun "$out/bin/mpiexec"

install -m 755 tools/gpu/bundle/selftest.sh "$out/selftest.sh"
install -m 644 tools/gpu/bundle/selftest.py tools/gpu/bundle/selftest_harness.py tools/gpu/bundle/selftest_bench.py \
  tests/compare_losses.py tools/bench/pytorch/bench_resnet_pytorch.py tools/bench/pytorch/bench_bert_pytorch.py \
  tools/bench/pytorch/bench_bert_qa_pytorch.py \
  tests/interop/check_bert_interop.py tests/interop/check_tokenizer.py \
  tests/golden/bert_state_dict_manifest.json "$out/tools/"
# The commit, marked -dirty when the tree had changes; "unknown" outside git.
git -C "$repo" describe --always --dirty --abbrev=40 > "$out/VERSION" 2>/dev/null || echo unknown > "$out/VERSION"

