# Sourced by the tools/bench/bench_*.sh scripts, from the repository root (where
# they cd first):
#   bench_options NAME FLAG=VAR... -- "$@"
#       sets each VAR from its "FLAG VALUE" among the arguments; anything
#       else is one line, "NAME: unknown option '...'", and exit 2
#   bench_build [--with-pytorch] TARGET...
#       the dependencies (tools/install_deps.sh), then the targets, quietly
#       unless the build fails
#   bench_tmp
#       tmp: a scratch folder, removed on exit
#   mpi
#       mpirun without binding, oversubscribed, allowed to run as root
#   bench_summary FILE KEY...
#       the named fields of a metrics file's summary (its last line), on
#       one line; KEY may be dotted (memory.peak_resident_bytes); a missing
#       one is 0

bench_options() {
  local name="$1"; shift
  local -A var_of=()
  while [ "$1" != -- ]; do var_of["${1%%=*}"]="${1#*=}"; shift; done
  shift
  while [ $# -gt 0 ]; do
    [ -n "${var_of[$1]:-}" ] || { echo "$name: unknown option '$1'" >&2; exit 2; }
    printf -v "${var_of[$1]}" '%s' "$2"
    shift 2
  done
}

bench_build() {
  local deps=()
  [ "$1" = --with-pytorch ] && { deps=(--with-pytorch); shift; }
  bash tools/install_deps.sh "${deps[@]}"
  bazel build "$@" >/dev/null 2>&1 || bazel build "$@"
}

bench_tmp() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

mpi=(mpirun --oversubscribe --bind-to none)
if [ "$(id -u)" -eq 0 ]; then mpi+=(--allow-run-as-root); fi

bench_summary() {
  python3 - "$@" <<'PY'
import json, sys
summary = json.loads(open(sys.argv[1]).read().splitlines()[-1])["summary"]
def field(key):
    value = summary
    for part in key.split("."):
        value = value.get(part, 0) if isinstance(value, dict) else 0
    return value
print(*(field(k) for k in sys.argv[2:]))
PY
}
