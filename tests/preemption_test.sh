#!/usr/bin/env bash
# Preemption under a real mpirun: SIGUSR1 to mpirun (which forwards it),
# SIGTERM to every rank (as Slurm sends it) and SIGUSR1 to one rank alone
# each stop every rank at one step boundary with a checkpoint of it and
# exit code 75; a single rank stops on SIGTERM the same way. Resumed with
# --resume, each continues where it stopped, with the losses of a run never
# stopped, bit for bit. The step stopped at skips its evaluation.
set -u
bin=launch/ddp_train
source tests/lib.sh
tools/make_image_dataset --out "$tmp/eval.safetensors" --samples 16 --first-sample 1000 > /dev/null || exit 1
common=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 4 --threads 1 --seed 11 --optimizer sgd
        --lr 0.02 --momentum 0.9 --lr-schedule constant --zero-init-residual
        --eval-data "tensors:$tmp/eval.safetensors" --eval-every 1 --log-every 1)

# preempt NAME NP HOW: trains (up to 400 steps) until step 3 is printed,
# signals HOW (mpirun-usr1, ranks-term, one-usr1, self-term), and checks the
# exit code, the checkpoint and its resumption.
preempt() {
  local name="$1" np="$2" how="$3"
  local dir="$tmp/$name.ckpt" log="$tmp/$name.log"
  rm -rf "$dir"
  if [ "$np" -gt 1 ]; then
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" --steps 400 \
      --checkpoint-dir "$dir" > "$log" 2>&1 &
  else
    timeout 120 "$bin" "${common[@]}" --steps 400 --checkpoint-dir "$dir" > "$log" 2>&1 &
  fi
  local launcher=$!
  for _ in $(seq 1 240); do grep -q "^step     3/" "$log" && break; sleep 0.25; done
  local top ranks
  top=$(pgrep -P "$launcher" | sed -n 1p)  # mpirun, or ddp_train itself (under timeout)
  ranks=$(pgrep -P "$top" -f ddp_train)
  case "$how" in
    mpirun-usr1) kill -USR1 "$top" ;;
    ranks-term) kill -TERM $ranks ;;
    one-usr1) kill -USR1 "$(echo "$ranks" | tail -1)" ;;
    self-term) kill -TERM "$top" ;;
  esac
  wait "$launcher"
  local rc=$?
  [ "$rc" -eq 75 ] || { cat "$log"; fail "$name: exit code $rc, not 75"; return; }
  local stopped
  stopped=$(sed -n 's/^ddp_train: stopped after step \([0-9]*\) on .*/\1/p' "$log")
  [ -n "$stopped" ] || { cat "$log"; fail "$name: no 'stopped after step' line"; return; }
  [ "$(cat "$dir/latest")" = "$(printf 'step_%08d' "$stopped")" ] || fail "$name: latest is $(cat "$dir/latest")"
  grep -q "Check failed\|terminate called" "$log" && fail "$name: crashed"
  # Every step evaluates but the one stopped at: its checkpoint commits
  # only after the loop.
  grep -q "^step *1/400 .* eval " "$log" || fail "$name: step 1 did not evaluate"
  grep -q "^step *$stopped/400 .* eval " "$log" && fail "$name: step $stopped, stopped at, evaluated"
  local until=$((stopped + 2))
  echo "$name: $(grep '^ddp_train: stopped' "$log")"
  # Resumed, and a run never stopped, to the same step.
  if [ "$np" -gt 1 ]; then
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" --steps "$until" \
      --checkpoint-dir "$dir" --resume --metrics-file "$tmp/$name.resumed.jsonl" > "$tmp/$name.resumed.log" 2>&1
    local r1=$?
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" --steps "$until" \
      --metrics-file "$tmp/$name.full.jsonl" > "$tmp/$name.full.log" 2>&1
    local r2=$?
  else
    timeout 120 "$bin" "${common[@]}" --steps "$until" --checkpoint-dir "$dir" --resume \
      --metrics-file "$tmp/$name.resumed.jsonl" > "$tmp/$name.resumed.log" 2>&1
    local r1=$?
    timeout 120 "$bin" "${common[@]}" --steps "$until" --metrics-file "$tmp/$name.full.jsonl" \
      > "$tmp/$name.full.log" 2>&1
    local r2=$?
  fi
  [ "$r1" -eq 0 ] && [ "$r2" -eq 0 ] || { cat "$tmp/$name.resumed.log"; fail "$name: resumed $r1, full $r2"; return; }
  grep -q "continuing from .* at step $stopped" "$tmp/$name.resumed.log" || fail "$name: did not resume at $stopped"
  /usr/bin/python3 tests/compare_losses.py "$tmp/$name.full.jsonl" "$tmp/$name.resumed.jsonl" --resumed --rtol 0 \
    --steps 2 || fail "$name: resumed losses differ"
}

export OMPI_MCA_rmaps_base_oversubscribe=1
preempt mpirun_usr1 2 mpirun-usr1
preempt ranks_term 2 ranks-term
preempt one_rank_usr1 2 one-usr1
preempt single_term 1 self-term

# A stop is not deferred without limit (issue 34, item 11). A step that
# never ends (a trillion micro-batches): SIGTERM to every rank, and no step
# boundary within --preemption-grace-s 2, ends every rank within the grace
# + 10 s with one line naming the signal and the flag; a second SIGTERM to
# a single rank ends it at once, under the default grace (30 s).
endless=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 2 --threads 1 --steps 5
         --accumulation-steps 1000000000000)
unanswered() {  # unanswered NAME NP HOW GRACE_ARGS...
  local name="$1" np="$2" how="$3"; shift 3
  local log="$tmp/$name.log" launcher top ranks start rc elapsed
  if [ "$np" -gt 1 ]; then
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${endless[@]}" "$@" > "$log" 2>&1 &
  else
    timeout 120 "$bin" "${endless[@]}" "$@" > "$log" 2>&1 &
  fi
  launcher=$!
  for _ in $(seq 1 400); do grep -q "^ddp_train: resnet18" "$log" && break; sleep 0.05; done
  sleep 0.5  # inside the first step
  top=$(pgrep -P "$launcher" | sed -n 1p)
  ranks=$(pgrep -P "$top" -f ddp_train)
  [ -n "$ranks" ] || ranks="$top"  # a single rank runs under timeout itself
  start=$(date +%s)
  case "$how" in
    grace) kill -TERM $ranks ;;
    twice) kill -TERM $ranks; sleep 1; kill -TERM $ranks ;;
  esac
  wait "$launcher"
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  case "$how" in
    grace) local pattern="error: SIGTERM came 2 s ago and the step in progress has not ended (--preemption-grace-s 2): ending now, without its checkpoint" limit=12 ;;
    twice) local pattern="error: a second SIGTERM: ending now, without a checkpoint of the step in progress" limit=4 ;;
  esac
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 75 ] || { cat "$log"; fail "$name: exit $rc"; return; }
  [ "$elapsed" -le "$limit" ] || fail "$name: ended $elapsed s after the first signal (limit $limit s)"
  # The first rank to end takes the job with it: the others may end on
  # mpirun's SIGTERM (a second signal) before their own grace runs out.
  local second="error: a second SIGTERM: ending now, without a checkpoint of the step in progress"
  local lines ours either
  lines=$(grep -c "error:" "$log")
  ours=$(grep -cF -- "$pattern" "$log")
  either=$(grep -cF -e "$pattern" -e "$second" "$log")
  [ "$ours" -ge 1 ] && [ "$either" -eq "$lines" ] && [ "$lines" -le "$np" ] ||
    { cat "$log"; fail "$name: not one line a rank, at least one '$pattern'"; }
  grep -q "Check failed\|terminate called" "$log" && fail "$name: crashed"
  echo "$name ($elapsed s after the signal, exit $rc): $(grep -m1 -F -- "$pattern" "$log")"
}
unanswered grace_two_ranks 2 grace --preemption-grace-s 2
unanswered second_signal 1 twice

finish "preemption test"
