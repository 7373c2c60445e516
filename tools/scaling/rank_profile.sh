#!/usr/bin/env bash
# One rank's share of tools/scaling/scaling_validation's profile runs, started by the
# same launcher as the ranks of the measured job (mpirun, or mpirun into
# namespace hosts), so each profile run is scheduled where and as that rank
# will be: in its host's session and scheduling group (Linux autogroups give
# every session an equal share of the CPU, and Open MPI starts each remote
# host's ranks in a session of their own).
#
#   rank_profile.sh PREFIX DDP_TRAIN [ddp_train flags]
#
# Writes PREFIX_<rank+1>.json (the step profile) and .log. The profile run
# is a single-rank job: the launcher's MPI environment is removed for it.
set -u
prefix="$1" ddp_train="$2"
shift 2
rank="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}"
i=$((rank + 1))
(
  for v in $(compgen -e); do
    case "$v" in OMPI_* | PMIX_* | OPAL_* | ORTE_* | PMI_* | SLURM_*) unset "$v" ;; esac
  done
  exec timeout 900 "$ddp_train" "$@" --profile-file "${prefix}_$i.json"
) > "${prefix}_$i.log" 2>&1
rc=$?
[ "$rc" = 0 ] || { echo "rank_profile: the profile run failed on rank $rank:" >&2; tail -5 "${prefix}_$i.log" >&2; }
exit "$rc"
