# Sourced by shell tests: report_skip SUITE CASE MESSAGE prints the reason
# and writes a JUnit record Bazel keeps, so the summary counts a skip, not
# a pass. The caller exits 0 after it.
report_skip() {
  echo "SKIPPED: $3"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat > "$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="$1" tests="1" skipped="1">
<testcase classname="$1" name="$2"><skipped message="$3"/></testcase>
</testsuite></testsuites>
XML
  fi
}
