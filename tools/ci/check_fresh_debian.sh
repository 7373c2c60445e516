#!/usr/bin/env bash
# Runs the README's Quick start, as a newcomer would, in a freshly
# bootstrapped Debian 12 (debootstrap --variant=minbase: no compiler, no
# MPI, no procps, nothing of this project), from a clone of this
# repository's HEAD: the two commands of the Quick start's code block, read
# from README.md, one after the other. It passes when both exit 0 and the
# second's closing line says "0 failed". A program the tests call that
# tools/install_deps.sh does not install fails here first.
#
#   tools/ci/check_fresh_debian.sh [--keep]     (--keep: leave the root in /var/tmp for a look)
#
# Needs root (chroot, mounts) and the Debian mirror (debootstrap, apt); the
# minimal root is cached in /var/tmp/ddp-root-cache and copied fresh every
# time. Long: the build and every test from nothing, about as long as CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "check_fresh_debian.sh: needs root (chroot, mounts)" >&2; exit 1; }
keep=0
[ "${1:-}" = "--keep" ] && keep=1
mapfile -t commands < <(python3 - <<'PY'
import re
text = open("README.md").read()
block = re.search(r"^## Quick start\n(.*?)^```[^\n]*\n(.*?)^```", text, re.S | re.M)
for line in (block.group(2) if block else "").splitlines():
    if line.strip() and not line.strip().startswith("#"):
        print(line.strip())
PY
)
[ "${#commands[@]}" -eq 2 ] || { echo "check_fresh_debian.sh: README's Quick start holds ${#commands[@]} commands, not 2" >&2; exit 1; }

cache=/var/tmp/ddp-root-cache/bookworm
if [ ! -x "$cache/bin/sh" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  rm -rf "$cache"
  mkdir -p "$(dirname "$cache")"
  debootstrap --variant=minbase bookworm "$cache" http://deb.debian.org/debian >/dev/null
fi
work=$(mktemp -d /var/tmp/ddp-fresh-debian.XXXXXX)
root="$work/root"
cleanup() {
  local rc=$?
  # Every mount under the root, deepest first: ours, and any the tests made
  # (the Slurm test's network namespaces under /run/netns).
  local mounted
  mounted=$(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
  for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
  if [ "$keep" -eq 1 ]; then
    echo "check_fresh_debian.sh: the root is kept in $root"
  else
    rm -rf "$work" 2>/dev/null || echo "check_fresh_debian.sh: warning: $work could not be removed in full"
  fi
  exit "$rc"
}
trap cleanup EXIT
cp -a "$cache" "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone -q --no-hardlinks "file://$(pwd)" "$root/root/ddp_train"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o size=4g shm "$root/dev/shm"

echo "check_fresh_debian.sh: $(git rev-parse --short HEAD) in a fresh Debian 12 root ($root)"
status=0
for i in 0 1; do
  echo "== ${commands[$i]}"
  start=$(date +%s)
  set +e
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
    /bin/bash -c "cd /root/ddp_train && ${commands[$i]}" > "$work/command$i.log" 2>&1
  rc=$?
  set -e
  tail -n 5 "$work/command$i.log"
  echo "== exit $rc after $(( $(date +%s) - start )) s"
  cp "$work/command$i.log" "/var/tmp/ddp-fresh-debian-command$i.log"
  [ "$rc" -eq 0 ] || status=1
done
last=$(grep '^tests: ' "$work/command1.log" | tail -n 1)
case "$last" in
  "tests: "*" passed, 0 failed, "*) ;;
  *) echo "check_fresh_debian.sh: the tests' closing line is '${last:-missing}'"; status=1 ;;
esac
[ "$status" -eq 0 ] && echo "check_fresh_debian.sh: both commands passed ($last)" && exit 0
echo "check_fresh_debian.sh: failed; the logs: /var/tmp/ddp-fresh-debian-command{0,1}.log"
exit 1
