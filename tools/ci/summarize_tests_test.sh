#!/usr/bin/env bash
# summarize_tests.py never stops with a traceback: a malformed test.xml, one
# with no case and a missing one each count as that target failing, and
# failed cases are named.
set -u
script="$PWD/tools/ci/summarize_tests.py"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
cd "$tmp" || exit 1
mkdir -p bazel-testlogs/a/bad bazel-testlogs/a/failing bazel-testlogs/a/empty bazel-testlogs/a/good
printf '<testsuites><testsuite' > bazel-testlogs/a/bad/test.xml
printf '<testsuites><testsuite><testcase classname="X" name="y"><failure/></testcase></testsuite></testsuites>' \
  > bazel-testlogs/a/failing/test.xml
printf '<testsuites><testsuite></testsuite></testsuites>' > bazel-testlogs/a/empty/test.xml
printf '<testsuites><testsuite><testcase classname="X" name="ok"/><testcase classname="X" name="gpu"><skipped/></testcase></testsuite></testsuites>' \
  > bazel-testlogs/a/good/test.xml
out=$(python3 "$script" //a:bad //a:failing //a:empty //a:good //a:missing 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q '^failed: //a:failing X.y$' <<< "$out" || { echo "FAIL: the failed case is not named"; exit 1; }
grep -q 'Traceback' <<< "$out" && { echo "FAIL: a traceback"; exit 1; }
[ "$(printf '%s\n' "$out" | tail -1)" = "tests: 1 passed, 4 failed, 1 skipped" ] || { echo "FAIL: the closing line"; exit 1; }
echo "summarize_tests test: passed"
