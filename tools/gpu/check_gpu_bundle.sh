#!/usr/bin/env bash
# Checks the GPU self-test bundle where nothing of this project is
# installed: a fresh minimal Debian 12 root (debootstrap --variant=minbase
# with python3, which the self-test runs on, and no other package; /proc
# and /sys mounted) with only the CUDA toolkit's cuDNN, cuBLASLt and NCCL
# libraries copied in. There every bundled program must load (no missing
# shared library), ddp_train must train on CPU as a singleton and under the
# bundle's own `mpirun -np 2`, selftest.sh must end with its one "no GPU"
# line and exit status 3, and its CPU rehearsal of the tiers that need no
# PyTorch must pass.
#
#   tools/gpu/check_gpu_bundle.sh
#
# Needs root, and the Debian mirror the first time (debootstrap), so it runs
# outside CI's network-less phase; the minimal root is cached in
# /var/tmp/ddp-root-cache and copied fresh for every check.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "check_gpu_bundle.sh: needs root (chroot, mounts)" >&2; exit 1; }
cache=/var/tmp/ddp-root-cache/bookworm-python3
if [ ! -x "$cache/bin/sh" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  rm -rf "$cache"
  mkdir -p "$(dirname "$cache")"
  debootstrap --variant=minbase --include=python3 bookworm "$cache" http://deb.debian.org/debian >/dev/null
fi

work=$(mktemp -d /var/tmp/ddp-bundle-check.XXXXXX)
root="$work/root"
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  umount "$root/sys" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cp -a "$cache" "$root"
bash tools/gpu/gpu_bundle.sh "$work/ddp_bundle"
tar -C "$root/opt" -xJf "$work/ddp_bundle.tar.xz"
cuda_lib=$(dirname "$(readlink -f /usr/local/cuda/lib64/libcudnn.so.9)")
mkdir -p "$root/opt/cuda-libs"
cp -L "$cuda_lib"/libcudnn*.so.9 "$cuda_lib"/libcublasLt.so.13 "$cuda_lib"/libnccl.so.2 "$root/opt/cuda-libs/"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root DDP_CUDA_LIBS=/opt/cuda-libs /bin/sh -c "$1"; }

echo "== every bundled program loads"
out=$(in_root 'B=/opt/ddp_bundle; cd $B && . ./env.sh && for p in libexec/*; do
  lib/ld-linux-x86-64.so.2 --library-path "$DDP_BUNDLE_LIBRARY_PATH" --list "$p" 2>&1 |
    grep -E "not found|error while loading" | sed "s|^|$p: |"; done')
if [ -n "$out" ]; then fail "missing libraries: $out"; else echo "ok: no missing shared library"; fi

small="--model resnet18 --image-size 32 --batch-size 4 --num-classes 10 --steps 2 --threads 1 --device cpu"
echo "== ddp_train alone (singleton MPI)"
if out=$(in_root "cd /tmp && /opt/ddp_bundle/bin/ddp_train $small" 2>&1) && grep -q '^summary: resnet18  1 rank' <<< "$out"; then
  printf '%s\n' "$out" | tail -n 1
else
  fail "singleton run: $out"
fi
echo "== ddp_train under the bundle's mpirun -np 2"
if out=$(in_root "cd /tmp && /opt/ddp_bundle/bin/mpirun -np 2 --bind-to none /opt/ddp_bundle/bin/ddp_train $small" 2>&1) &&
   grep -q '^summary: resnet18  2 ranks' <<< "$out"; then
  printf '%s\n' "$out" | grep '^summary'
else
  fail "mpirun -np 2: $out"
fi
echo "== selftest.sh without a GPU"
set +e
out=$(in_root "cd /tmp && /opt/ddp_bundle/selftest.sh /tmp/selftest" 2>&1)
rc=$?
set -e
printf '%s\n' "$out"
[ "$rc" -eq 3 ] || fail "selftest.sh exited $rc, not 3"
grep -q 'selftest: no GPU visible' <<< "$out" || fail "selftest.sh did not print its no-GPU line"
[ -s "$root/tmp/selftest/report.json" ] || fail "selftest.sh wrote no report.json"
[ "$(grep -c . <<< "$out")" -eq 1 ] || fail "selftest.sh printed more than its one no-GPU line"
echo "== selftest.sh --rehearse, the tiers that need no PyTorch"
tiers=versions,gpu_tests,training,equivalence,bert,checkpoint,mixed_precision,memory,memory_plan,watchdog,data
set +e
out=$(in_root "cd /tmp && /opt/ddp_bundle/selftest.sh --rehearse --only $tiers /tmp/rehearse" 2>&1)
rc=$?
set -e
printf '%s\n' "$out" | grep '^selftest: '
[ "$rc" -eq 4 ] || fail "the rehearsal exited $rc, not 4 (incomplete: some tiers not selected)"
python3 - "$root/tmp/rehearse/report.json" "$tiers" <<'PY' || fail "a rehearsed tier did not pass"
import json, sys
r = json.load(open(sys.argv[1]))
bad = [t["tier"] for t in r["tiers"] if t["tier"] in sys.argv[2].split(",") and t["status"] != "passed"]
print("rehearsed tiers not passed:", bad or "none")
sys.exit(1 if bad else 0)
PY

size=$(stat -c %s "$work/ddp_bundle.tar.xz")
echo "packed bundle: $((size / 1048576)) MiB"
[ "$failures" -eq 0 ] || { echo "check_gpu_bundle.sh: $failures failure(s)"; exit 1; }
echo "check_gpu_bundle.sh: all checks passed"
