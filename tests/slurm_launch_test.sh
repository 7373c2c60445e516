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
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

skip() {  # a JUnit record Bazel keeps, so the summary counts a skip, not a pass
  if [ "${DDP_REQUIRE_SLURM:-0}" = 1 ]; then echo "FAIL: $* (DDP_REQUIRE_SLURM=1)"; exit 1; fi
  echo "SKIPPED: $*"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat > "$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="slurm_launch" tests="1" skipped="1">
<testcase classname="SlurmLaunch" name="SrunMatchesMpirun"><skipped message="$*"/></testcase>
</testsuite></testsuites>
XML
  fi
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root"
for tool in slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || skip "$tool not installed"
done

host=$(hostname -s)
# Slurm resolves the host's name, with AI_ADDRCONFIG: a network namespace
# with only loopback has no address that counts (.ci/run adds one).
getent ahostsv4 "$host" >/dev/null || skip "host name $host does not resolve to an IPv4 address"

# Two free TCP ports on loopback for slurmctld and slurmd.
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

# Slurm's step daemon puts Unix sockets in its spool directory, whose path
# must stay under 108 bytes: Bazel's TEST_TMPDIR is too deep.
dir=$(mktemp -d /tmp/ddp-slurm.XXXXXX) || exit 1
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
export SLURM_CONF="$dir/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=ddptest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=ddpnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ddpnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
slurmctld -D -c -i -f "$SLURM_CONF" > "$dir/log/slurmctld.out" 2>&1 & pids+=($!)
slurmd -D -N ddpnode -f "$SLURM_CONF" > "$dir/log/slurmd.out" 2>&1 & pids+=($!)
ready=0
for _ in $(seq 1 30); do
  if timeout 5 sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)'; then ready=1; break; fi
  sleep 1
done
if [ "$ready" -ne 1 ]; then
  echo "FAIL: Slurm did not come up within 30 s; its logs:"; tail -n 20 "$dir"/log/*.log
  exit 1
fi
echo "slurm up: $(sinfo -h -N -o '%N %T %c')"
srun --mpi=list 2>&1 | grep -q pmix || { srun --mpi=list; echo "FAIL: this Slurm has no pmix plugin"; exit 1; }

tools/make_image_dataset --out "$tmp/data.safetensors" --samples 32 --image-size 32 --num-classes 10 || exit 1
common=(--model resnet18 --image-size 32 --num-classes 10 --data "tensors:$tmp/data.safetensors" --steps 2
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
  cat "$tmp/srun.log"; tail -n 20 "$dir"/log/*.log; fail "srun --mpi=pmix -n 2 failed"
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
     ! printf '%s\n' "$out" | grep -q "rank 0: error: $pattern"; then
    fail "srun with a rank stopped $what: exit $rc after $elapsed s:"; echo "$out"
  else
    echo "ok, stopped $what ($elapsed s): $(printf '%s\n' "$out" | grep -m1 'rank 0: error')"
  fi
}
srun_stuck mid-backward DDP_TEST_STOP_IN_BACKWARD=1:2 "all-reduce of gradient bucket .* at step 2 has not finished"
srun_stuck "in a collective" DDP_TEST_STOP_IN_COLLECTIVE=1:12 ".* has not finished after"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"
