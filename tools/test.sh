#!/usr/bin/env bash
# Quick start, second command: installs what is missing, builds everything and
# runs every test, then prints one line counting test cases. Extra arguments
# go to `bazel test` (e.g. --test_tag_filters=-multi_rank).
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh || exit 1
bazel test --keep_going //... "$@"
status=$?
python3 tools/ci/summarize_tests.py $(bazel query 'tests(//...)' 2>/dev/null)
exit "$status"
