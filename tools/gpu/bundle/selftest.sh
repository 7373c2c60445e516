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
# The Python: DDP_SELFTEST_PYTHON where set; else the first of python3 on
# PATH, /usr/bin/python3 and /usr/local/bin/python3 that imports torch (the
# benchmarks' peer), else the first that runs at all. One line says which
# (DDP_SELFTEST_PYTHON_CHOICE, which selftest.py prints as the tiers start
# and keeps in its report).
if [ -n "${DDP_SELFTEST_PYTHON:-}" ]; then
  PY=$DDP_SELFTEST_PYTHON
  command -v "$PY" >/dev/null 2>&1 || { echo "selftest: DDP_SELFTEST_PYTHON=$PY is not a program here"; exit 1; }
  choice="selftest: Python $PY (DDP_SELFTEST_PYTHON)"
else
  PY="" tried=""
  for candidate in "$(command -v python3 2>/dev/null)" /usr/bin/python3 /usr/local/bin/python3; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    case " $tried " in *" $candidate "*) continue ;; esac
    tried="$tried $candidate"
    [ -n "$PY" ] || PY=$candidate
    if "$candidate" -c 'import torch' >/dev/null 2>&1; then
      PY=$candidate torch=1
      break
    fi
  done
  if [ -z "$PY" ]; then
    echo "selftest: python3 (3.8 or later) is needed to run the self-test; none found (set DDP_SELFTEST_PYTHON)"
    exit 1
  fi
  if [ -n "${torch:-}" ]; then
    choice="selftest: Python $PY, which imports torch (tried:$tried)"
  else
    choice="selftest: Python $PY; none of$tried imports torch, so the benchmarks' PyTorch rows will fail (set DDP_SELFTEST_PYTHON to one that does)"
  fi
fi
# env.sh finds the CUDA libraries a pip-installed PyTorch brings through it.
export DDP_SELFTEST_PYTHON="$PY" DDP_SELFTEST_PYTHON_CHOICE="$choice"
. "$B/env.sh"
exec "$PY" "$B/tools/selftest.py" --bundle "$B" "$@"
