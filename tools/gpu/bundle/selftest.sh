#!/bin/sh
# The GPU self-test's entry point (tools/gpu/bundle/selftest.py holds the tiers,
# their checks and the report; run it with no argument for its usage):
#
#   selftest.sh [OUT_DIR]                  on a machine with an NVIDIA GPU
#   selftest.sh --rehearse OUT_DIR         every tier on CPU ranks (CI)
#   selftest.sh --only TIER,... OUT_DIR    a re-run of some tiers
#
# It needs python3 (3.8 or later); PyTorch there is the benchmarks' peer,
# transformers the BERT interop's. Exit status: 0 passed, 1 failed, 3 no
# GPU visible, 4 incomplete (a tier cut by the budget or not selected).
B=$(cd "$(dirname "$0")" && pwd)
. "$B/env.sh"
PY=${DDP_SELFTEST_PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "selftest: $PY is needed to run the self-test (3.8 or later; set DDP_SELFTEST_PYTHON to choose one)"
  exit 1
fi
exec "$PY" "$B/tools/selftest.py" --bundle "$B" "$@"
