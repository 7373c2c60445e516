#!/usr/bin/env bash
# `srun --mpi=pmix -n 2 ddp_train` on a real single-node Slurm, started here
# as root with a throwaway configuration (auth/none, loopback, free ports):
# the job trains on 2 ranks, with the node's cores split between them, and
# only rank 0 prints; its per-step losses and final weights equal
# those of the same job under `mpirun -np 2`; a rank stopped mid-backward
# under srun is ended by the watchdog; a bad flag under srun still
# ends every rank with one line and a non-zero exit.
#   slurm_launch_test.sh
# Without root, without Slurm's daemons (Debian slurmd, slurmctld,
# slurm-client; `tools/install_deps.sh --with-slurm` installs them), or where this host's
# name does not resolve (Slurm's daemons need it), the test reports itself
# skipped, unless DDP_REQUIRE_SLURM=1 (CI) makes that a failure.
set -u
bin=launch/ddp_train
source tests/lib.sh

slurm_suite=SlurmLaunch slurm_case=SrunMatchesMpirun
. tests/slurm_cluster.sh

resnet18_data 32
common=("${resnet18_flags[@]}" --steps 2
        --batch-size 4 --lr 0.02 --momentum 0.9 --seed 5)
# No --threads: each rank takes the node's cores divided by its local ranks,
# which the shared-memory split must count under srun as under mpirun.
threads=$(( $(getconf _NPROCESSORS_ONLN) / 2 )); [ "$threads" -ge 1 ] || threads=1

if ! timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" \
    --metrics-file "$tmp/mpirun.jsonl" --save-weights "$tmp/mpirun.safetensors" > "$tmp/mpirun.log" 2>&1; then
  cat "$tmp/mpirun.log"; fail "mpirun -np 2 failed"
fi
if ! timeout 300 srun --mpi=pmix -n 2 --overcommit "$bin" "${common[@]}" \
    --metrics-file "$tmp/srun.jsonl" --save-weights "$tmp/srun.safetensors" > "$tmp/srun.log" 2>&1; then
  cat "$tmp/srun.log"; tail -n 20 "$slurm_dir"/log/*.log; fail "srun --mpi=pmix -n 2 failed"
fi
cat "$tmp/srun.log"
grep -q "2 ranks x $threads threads" "$tmp/srun.log" || fail "srun job did not report 2 ranks x $threads threads"
[ "$(grep -c '^step ' "$tmp/srun.log")" -eq 2 ] || fail "srun job printed progress other than once per step (rank 0 only)"
/usr/bin/python3 tests/compare_losses.py "$tmp/mpirun.jsonl" "$tmp/srun.jsonl" --steps 2 ||
  fail "losses differ between mpirun and srun"
tools/compare_weights "$tmp/mpirun.safetensors" "$tmp/srun.safetensors" --rtol 0 || fail "weights differ between mpirun and srun"

# Bad input under srun: every rank one line, non-zero exit, no hang.
out=$(timeout 120 srun --mpi=pmix -n 2 --overcommit "$bin" "${common[@]}" --bucket-mb -1 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | grep -c '^ddp_train: rank [01]: error: .*--bucket-mb')
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$lines" -ne 2 ]; then
  fail "srun with --bucket-mb -1: exit $rc, $lines rank error lines:"; echo "$out"
else
  echo "ok: $(printf '%s\n' "$out" | grep '^ddp_train: rank 0')"
fi

# A rank stopped (SIGSTOP, test hooks) mid-backward or inside a collective
# (its 12th) under srun, where Slurm's KillOnBadExit is 0: the watchdog
# ends the job within the timeout + 10 s, rank 0 naming what it waited for.
srun_stuck() {  # srun_stuck WHAT HOOK=VALUE PATTERN
  local what="$1" hook="$2" pattern="$3" start out rc elapsed
  start=$(date +%s)
  out=$(env "$hook" timeout 120 srun --mpi=pmix -n 2 --overcommit "$bin" "${common[@]}" --steps 20 \
        --comm-timeout-s 3 2>&1); rc=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$elapsed" -gt 30 ] ||
     ! grep -q "rank 0: error: $pattern" <<< "$out"; then
    fail "srun with a rank stopped $what: exit $rc after $elapsed s:"; echo "$out"
  else
    echo "ok, stopped $what ($elapsed s): $(grep -m1 'rank 0: error' <<< "$out")"
  fi
}
srun_stuck mid-backward DDP_TEST_STOP_IN_BACKWARD=1:2 "all-reduce of gradient bucket .* at step 2 has not finished"
srun_stuck "in a collective" DDP_TEST_STOP_IN_COLLECTIVE=1:12 ".* has not finished after"

finish --pass "all checks passed"
