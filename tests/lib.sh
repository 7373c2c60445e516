# Sourced by the shell tests (from the runfiles root, their working
# directory: `source tests/lib.sh`; list it in the sh_test's data):
#   tmp       a scratch folder: Bazel's TEST_TMPDIR, or a new one outside Bazel
#   fail MSG  prints "FAIL: MSG" and counts a failure; the test goes on
#   finish    the verdict and the exit status (below)
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# finish NAME: "NAME: all passed" and exit 0, or "NAME: N failure(s)" and
# exit 1.
# finish --pass LINE: LINE and exit 0, or "N failure(s)" and exit 1.
finish() {
  if [ "$1" = --pass ]; then
    [ "$failures" -eq 0 ] && echo "$2" && exit 0
    echo "$failures failure(s)"
    exit 1
  fi
  [ "$failures" -eq 0 ] && echo "$1: all passed" && exit 0
  echo "$1: $failures failure(s)"
  exit 1
}
