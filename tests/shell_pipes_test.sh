#!/usr/bin/env bash
# No shell script of the project pipes into a reader that may stop before
# its writer is done: `| grep -q`, `| grep -m N`, `| head`. Under
# `set -o pipefail` the writer then dies of SIGPIPE and the pipeline fails
# at random (tools/gpu/gpu_bundle.sh failed 25 times in 200 that way). Capture
# the output first: grep -q PATTERN <<< "$(command)".
set -u
early='\|[[:space:]]*(grep[[:space:]]+(-[[:alnum:]]*[qm]|--quiet|--max-count)|head([[:space:]]|$))'
# The pattern itself must catch what it is for, and pass what is safe.
for bad in 'ldd "$p" | grep -q libcudart' 'x | grep -qF -- "$y"' 'ls | head -1' 'a | grep -m1 b' 'a |grep --quiet b'; do
  grep -qE "$early" <<< "$bad" || { echo "FAIL: the check misses: $bad"; exit 1; }
done
for good in 'grep -q libcudart <<< "$(ldd "$p")"' 'a | grep -c b' 'a | sed -n 1p' 'grep -m1 x file'; do
  grep -qE "$early" <<< "$good" && { echo "FAIL: the check flags: $good"; exit 1; }
done

found=0
scripts=(.ci/run tests/*.sh tools/*.sh tools/bench/*.sh tools/ci/*.sh tools/gpu/*.sh tools/gpu/bundle/*.sh tools/ddp_sbatch
         tools/scaling/*.sh tools/scaling/scaling_validation tools/scaling/scaling_validation_table)
for f in "${scripts[@]}"; do
  [ "$f" = tests/shell_pipes_test.sh ] && continue  # its own examples
  [ -f "$f" ] || { echo "FAIL: $f is missing from the test's data"; exit 1; }
  # Lines that are not comments.
  hits=$(grep -nE "$early" "$f" | grep -vE '^[0-9]+:[[:space:]]*#')
  [ -n "$hits" ] || continue
  found=1
  printf '%s\n' "$hits" | sed "s|^|$f:|"
done
[ "$found" -eq 0 ] || { echo "FAIL: pipes into a reader that stops early (above)"; exit 1; }
echo "shell pipes test: ${#scripts[@]} scripts, none pipes into grep -q, grep -m or head"
