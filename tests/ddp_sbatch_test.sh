#!/usr/bin/env bash
# tools/ddp_sbatch: its usage errors (no `--`, --nodes 0, an unknown
# option, a flag it owns) are one line and exit 2; the printed script holds
# the srun line, one task per GPU, the USR1 signal, requeue and resume, and
# the NCCL_*/OMPI_MCA_* variables set. On a real single-node Slurm (as the
# srun test starts it): a submitted 2-rank ResNet-18 job completes with
# exit 0:0 and the metrics it wrote; a job sent USR1 mid-run (as Slurm does
# before its time limit) checkpoints, exits 75, is requeued, resumes and
# completes, its metrics holding each step once.
set -u
bin=launch/ddp_train
source tests/lib.sh
sbatch_tool=tools/ddp_sbatch

usage_error() {  # usage_error PATTERN ARGS...
  local pattern="$1"; shift
  local out rc
  out=$(bash "$sbatch_tool" "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$out" | grep -c .)" -ne 1 ] || ! grep -qF -- "$pattern" <<< "$out"; then
    fail "ddp_sbatch $*: expected exit 2 and one line with '$pattern', got exit $rc:"; printf '%s\n' "$out"
  fi
}
usage_error "'--' must separate ddp_sbatch's options from ddp_train's flags" --nodes 1 --ntasks-per-node 2
usage_error "--nodes must be a positive integer, got '0'" --nodes 0 --ntasks-per-node 2 -- --steps 1
usage_error "unknown option '--gpus'" --nodes 1 --ntasks-per-node 2 --gpus 2 -- --steps 1
usage_error "--ntasks-per-node is required" --nodes 1 -- --steps 1
usage_error "leave --metrics-file to ddp_sbatch" --nodes 1 --ntasks-per-node 2 -- --metrics-file m.jsonl
usage_error "--time '1h' is not a Slurm time" --nodes 1 --ntasks-per-node 2 --time 1h -- --steps 1

# ddp_train's flags are checked before a script is written (issue 34, item
# 16): its own line, exit 1, nothing in the output folder.
out=$(bash "$sbatch_tool" --nodes 1 --ntasks-per-node 2 --output-dir "$tmp/refused" --ddp-train "$PWD/$bin" --submit \
      -- --model resnet19 --lr -1 2>&1); rc=$?
[ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] &&
  grep -qF -- "ddp_train: error: --lr must be a positive number, got -1" <<< "$out" ||
  fail "ddp_sbatch with bad ddp_train flags: exit $rc, '$out'"
[ -z "$(ls -A "$tmp/refused" 2>/dev/null)" ] || fail "ddp_sbatch wrote into its output folder for a refused job"
out=$(bash "$sbatch_tool" --nodes 1 --ntasks-per-node 2 --output-dir "$tmp/refused" --ddp-train "$PWD/$bin" \
      -- --model resnet19 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -qF -- "--model 'resnet19' is unknown" <<< "$out" || fail "ddp_sbatch --model resnet19: exit $rc, '$out'"

# The script it writes is never the program it runs.
mkdir -p "$tmp/same" && cp "$bin" "$tmp/same/job.sbatch"
sum=$(cksum < "$tmp/same/job.sbatch")
out=$(bash "$sbatch_tool" --nodes 1 --ntasks-per-node 2 --output-dir "$tmp/same" --job-name job \
      --ddp-train "$tmp/same/job.sbatch" --submit -- --steps 1 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -qF -- "ddp_sbatch: --output-dir $tmp/same/job.sbatch is the --ddp-train program" <<< "$out" &&
  [ "$(cksum < "$tmp/same/job.sbatch")" = "$sum" ] || fail "ddp_sbatch over its --ddp-train: exit $rc, '$out'"

script=$(NCCL_IB_DISABLE=1 OMPI_MCA_btl=self,vader bash "$sbatch_tool" --nodes 2 --ntasks-per-node 4 --gpus-per-node 4 \
         --time 2:00:00 --partition gpu --output-dir "$tmp/printed" --ddp-train "$PWD/$bin" -- --model resnet50 --lr 0.1)
for want in "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=4" "#SBATCH --gpus-per-node=4" "#SBATCH --time=2:00:00" \
            "#SBATCH --partition=gpu" "#SBATCH --signal=USR1@120" "#SBATCH --requeue" "export NCCL_IB_DISABLE=1" \
            "export OMPI_MCA_btl=self\\,vader" "srun --mpi=pmix --kill-on-bad-exit=0 " " --model resnet50 --lr 0.1 " \
            '--checkpoint-dir "$run/checkpoints" --resume' 'scontrol requeue "$SLURM_JOB_ID"'; do
  grep -qF -- "$want" <<< "$script" || { printf '%s\n' "$script"; fail "the script lacks '$want'"; }
done

slurm_suite=DdpSbatch slurm_case=SubmittedJobsTrainAndRequeue
. tests/slurm_cluster.sh

# wait_job ID SECONDS: until the job has left the queue; prints its state.
wait_job() {
  local state
  for _ in $(seq 1 "$2"); do
    state=$(scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$state"; return ;; esac
    sleep 1
  done
  echo "still ${state:-unknown} after $2 s"
}

resnet18_data 64
train=("${resnet18_flags[@]}" --batch-size 4
       --threads 1 --lr 0.02 --log-every 1)
job=$(bash "$sbatch_tool" --nodes 1 --ntasks-per-node 2 --output-dir "$tmp/jobs" --ddp-train "$PWD/$bin" --submit \
      -- "${train[@]}" --steps 3) || fail "submission"
echo "submitted job $job"
state=$(wait_job "$job" 120)
info=$(scontrol show job "$job" -o)
[ "$state" = COMPLETED ] && grep -q 'ExitCode=0:0' <<< "$info" ||
  { printf '%s\n' "$info"; cat "$tmp/jobs/"*"-$job.out"; fail "job $job: $state"; }
/usr/bin/python3 - "$tmp/jobs/$job/metrics.jsonl" <<'PY' || fail "job $job's metrics"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
s = records[-1]["summary"]
assert s["world_size"] == 2 and s["steps"] == 3, s
assert [r["step"] for r in records[:-1]] == [1, 2, 3]
print(f"job metrics: {s['world_size']} ranks, {s['steps']} steps, {s['samples_per_s']:.1f} images/s")
PY

# Preempted: USR1 to the job's tasks once it trains, a checkpoint, exit 75,
# requeued, resumed, completed.
job=$(bash "$sbatch_tool" --nodes 1 --ntasks-per-node 2 --output-dir "$tmp/jobs" --ddp-train "$PWD/$bin" --submit \
      -- "${train[@]}" --steps 150) || fail "submission"
log="$tmp/jobs/ddp_train-$job.out"
for _ in $(seq 1 240); do grep -q "^step     5/" "$log" 2>/dev/null && break; sleep 0.25; done
grep -q "^step     5/" "$log" 2>/dev/null || { cat "$log"; fail "job $job did not reach step 5 in 60 s"; }
scancel --signal=USR1 "$job" || fail "scancel --signal=USR1"
# A requeued job waits a while before it is eligible again (Slurm's way);
# once the node has finished cleaning up after the first attempt, the test
# makes it eligible at once.
for _ in $(seq 1 240); do
  # (Until the first attempt's step daemons are gone, a new attempt's step
  # of the same id fails to launch.)
  if grep -q 'JobState=PENDING' <<< "$(scontrol show job "$job" -o 2>/dev/null)" &&
     [ "$(sinfo -h -N -o '%T' 2>/dev/null)" = idle ] && ! pgrep -f "slurmstepd: \[$job\." >/dev/null; then
    sleep 2
    scontrol update JobId="$job" StartTime=now 2>/dev/null && break
  fi
  sleep 0.5
done
state=$(wait_job "$job" 240)
info=$(scontrol show job "$job" -o)
echo "preempted job $job: $state, $(printf '%s\n' "$info" | grep -o 'Restarts=[0-9]*')"
[ "$state" = COMPLETED ] || { printf '%s\n' "$info"; cat "$log"; fail "preempted job $job ended $state"; }
grep -q "ddp_sbatch: preempted; requeueing job $job" "$log" || { cat "$log"; fail "no requeue"; }
grep -q "continuing from .* at step" "$log" || { cat "$log"; fail "the requeued job did not resume"; }
/usr/bin/python3 - "$tmp/jobs/$job/metrics.jsonl" <<'PY' || fail "job $job's metrics after the requeue"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert "summary" in records[-1] and records[-1]["summary"]["steps"] == 150, records[-1]
steps = [r["step"] for r in records[:-1]]
assert steps == list(range(1, 151)), f"steps {steps[:10]}... ({len(steps)})"
print("after the requeue: each of 150 steps once, one summary")
PY

finish "ddp_sbatch test"
