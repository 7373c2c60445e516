#!/usr/bin/env bash
# Every relative link and image in README.md and docs/ resolves: the target
# file exists inside the repository, and a #anchor names a heading of its
# target (tests/check_doc_links.py, GitHub's anchor rules). Runs from the
# runfiles root, where README.md and docs/ sit at their repository paths.
set -u
[ -f README.md ] && [ -d docs ] || { echo "FAIL: README.md or docs/ is missing from the test's data"; exit 1; }
exec /usr/bin/python3 tests/check_doc_links.py README.md docs
