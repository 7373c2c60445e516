#!/usr/bin/env bash
# One rank's share of tools/scaling_validation's profile runs, started by the
# same launcher as the ranks of the measured job (mpirun, or mpirun into
# namespace hosts), so each profile run is scheduled where and as that rank
# will be: in its host's session and scheduling group (Linux autogroups give
# every session an equal share of the CPU, and Open MPI starts each remote
# host's ranks in a session of their own).
#
#   rank_profile.sh PREFIX LOAD_S COMM_BENCH DDP_TRAIN [ddp_train flags]
#
# Writes PREFIX_<rank+1>.json (the step profile), .log and .time (start and
# end, seconds since the epoch). The profile run is a single-rank job: the
# launcher's MPI environment is removed for it. With LOAD_S > 0 this rank
# also runs COMM_BENCH (an all-reduce of 16 MiB throughout, LOAD_S seconds,
# with the other ranks), started 3 s before the profile run and in the same
# session: the contention probe. Its table goes to PREFIX_comm_<rank+1>.txt.
set -u
prefix="$1" load_s="$2" comm_bench="$3" ddp_train="$4"
shift 4
rank="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}"
i=$((rank + 1))
loader=""
if [ "$load_s" != 0 ]; then
  "$comm_bench" --ops allreduce --noraw --min-bytes 16M --max-bytes 16M --seconds-per-size "$load_s" \
    > "${prefix}_comm_$i.txt" 2>&1 &
  loader=$!
  sleep 3
fi
start=$(date +%s.%N)
(
  for v in $(compgen -e); do
    case "$v" in OMPI_* | PMIX_* | OPAL_* | ORTE_* | PMI_* | SLURM_*) unset "$v" ;; esac
  done
  exec timeout 900 "$ddp_train" "$@" --profile-file "${prefix}_$i.json"
) > "${prefix}_$i.log" 2>&1
rc=$?
echo "$start $(date +%s.%N)" > "${prefix}_$i.time"
if [ -n "$loader" ]; then
  wait "$loader" || { echo "rank_profile: the comm_bench load failed on rank $rank" >&2; rc=1; }
fi
[ "$rc" = 0 ] || { echo "rank_profile: the profile run failed on rank $rank:" >&2; tail -5 "${prefix}_$i.log" >&2; }
exit "$rc"
