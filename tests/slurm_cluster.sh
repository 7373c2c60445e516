# Sourced by the Slurm tests: starts a real single-node Slurm as root with a
# throwaway configuration (auth/none, loopback, free ports, one node of 2
# CPUs, partition "test"), exports SLURM_CONF, sets $slurm_dir (its state
# and logs) and stops it on exit. Without root, without Slurm's daemons
# (Debian slurmd, slurmctld, slurm-client; `tools/install_deps.sh
# --with-slurm` installs them), or where this host's name does not resolve
# (Slurm's daemons need it), the test reports itself skipped (a JUnit
# record named by $slurm_suite and $slurm_case), unless DDP_REQUIRE_SLURM=1
# (CI) makes that a failure.
skip() {  # a JUnit record Bazel keeps, so the summary counts a skip, not a pass
  if [ "${DDP_REQUIRE_SLURM:-0}" = 1 ]; then echo "FAIL: $* (DDP_REQUIRE_SLURM=1)"; exit 1; fi
  source tests/report_skip.sh
  report_skip "$slurm_suite" "$slurm_case" "$*"
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
slurm_dir=$(mktemp -d /tmp/ddp-slurm.XXXXXX) || exit 1
mkdir -p "$slurm_dir/state" "$slurm_dir/spool" "$slurm_dir/log"
export SLURM_CONF="$slurm_dir/slurm.conf"
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
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/log/slurmctld.log
SlurmdLogFile=$slurm_dir/log/slurmd.log
NodeName=ddpnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ddpnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$slurm_dir"
}
trap cleanup EXIT
slurmctld -D -c -i -f "$SLURM_CONF" > "$slurm_dir/log/slurmctld.out" 2>&1 & pids+=($!)
slurmd -D -N ddpnode -f "$SLURM_CONF" > "$slurm_dir/log/slurmd.out" 2>&1 & pids+=($!)
ready=0
for _ in $(seq 1 30); do
  if grep -qE '^(idle|mixed)' <<< "$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null)"; then ready=1; break; fi
  sleep 1
done
if [ "$ready" -ne 1 ]; then
  echo "FAIL: Slurm did not come up within 30 s; its logs:"; tail -n 20 "$slurm_dir"/log/*.log
  exit 1
fi
echo "slurm up: $(sinfo -h -N -o '%N %T %c')"
grep -q pmix <<< "$(srun --mpi=list 2>&1)" || { srun --mpi=list; echo "FAIL: this Slurm has no pmix plugin"; exit 1; }
