#!/usr/bin/env bash
# No hangs: a rank that stays alive but stops answering (SIGSTOP, through a
# test hook) mid-backward or inside a collective leaves its peer waiting in
# a collective; the watchdog (--comm-timeout-s 3) ends the job within the
# timeout + 10 s, and the waiting rank's last line names what it waited for
# (the collective, its bucket, the step). A rank that throws ends the job
# with one line. With the default timeout the healthy run is untouched.
set -u
bin=launch/ddp_train
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
common=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 4 --threads 1 --steps 40 --bucket-mb 4
        --first-bucket-mb 0.3)

# stuck NAME PATTERN ENV=VALUE [ARGS...]: rank 1 stops; rank 0 must end the
# job within the timeout + 10 s (and the start-up), with a line matching
# PATTERN.
stuck() {
  local name="$1" pattern="$2" hook="$3"; shift 3
  local start end
  start=$(date +%s)
  env "$hook" timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" --comm-timeout-s 3 "$@" \
    > "$tmp/$name.log" 2>&1
  local rc=$?
  end=$(date +%s)
  [ "$rc" -ne 0 ] || fail "$name: exit status 0"
  [ "$rc" -ne 124 ] || fail "$name: hung until the test's own timeout"
  [ $((end - start)) -le 25 ] || fail "$name: took $((end - start)) s (start-up, 2 steps, timeout 3 s + 10 s)"
  grep -q "rank 0: error: $pattern" "$tmp/$name.log" || { cat "$tmp/$name.log"; fail "$name: no line matching '$pattern'"; }
  echo "$name ($((end - start)) s): $(grep -m1 'rank 0: error:' "$tmp/$name.log")"
}

stuck mid_backward "all-reduce of gradient bucket [0-9]* (.* MPI) at step 3 has not finished after [0-9]* s (--comm-timeout-s 3)" \
  DDP_TEST_STOP_IN_BACKWARD=1:3
stuck mid_backward_zero "reduce-scatter of gradient bucket [0-9]* (.* MPI) at step 3 has not finished" \
  DDP_TEST_STOP_IN_BACKWARD=1:3 --zero-stage 2
# Rank 1's 12th collective: past the start-up broadcasts, inside training.
stuck in_collective ".* at step [0-9]* has not finished after [0-9]* s" DDP_TEST_STOP_IN_COLLECTIVE=1:12

# A rank that throws (a corrupt sample it cannot skip) ends the job at once
# with one line, not a hang nor a stack trace.
start=$(date +%s)
DDP_TEST_THROW=1:2 timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" > "$tmp/throw.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -le 20 ] || { cat "$tmp/throw.log"; fail "throw: exit $rc after $elapsed s"; }
grep -q "^ddp_train: rank 1: error: rank 1 cannot read sample [0-9]*: it is corrupt (DDP_TEST_THROW); ending the job" \
  "$tmp/throw.log" || { cat "$tmp/throw.log"; fail "throw: no line"; }
grep -q "terminate called\|Check failed" "$tmp/throw.log" && fail "throw: a crash, not one line"
echo "throw ($elapsed s): $(grep -m1 'rank 1: error' "$tmp/throw.log")"

# A collective that fails on one rank (its ring reduce-scatter's send
# refused after the receive was posted, a test hook) ends the job at once:
# that rank names the failure; no hang, no wait for the timeout.
start=$(date +%s)
DDP_TEST_FAIL_ISEND=1:5 timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" --zero-stage 2 \
  > "$tmp/isend.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -le 20 ] || { cat "$tmp/isend.log"; fail "isend: exit $rc after $elapsed s"; }
grep -q "^ddp_train: rank 1: error: gradient reduction failed at step [0-9]*: .*MPI_Isend refused (DDP_TEST_FAIL_ISEND); ending the job" \
  "$tmp/isend.log" || { cat "$tmp/isend.log"; fail "isend: no line"; }
echo "isend ($elapsed s): $(grep -m1 'rank 1: error' "$tmp/isend.log")"

# Healthy, with the default timeout: trains and exits 0.
timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" --steps 3 > "$tmp/healthy.log" 2>&1 ||
  { cat "$tmp/healthy.log"; fail "the healthy run"; }

[ "$failures" -eq 0 ] && echo "watchdog test: all passed" && exit 0
echo "watchdog test: $failures failure(s)"
exit 1
