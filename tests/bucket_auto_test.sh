#!/usr/bin/env bash
# --bucket-mb auto at 2 ranks under mpirun: rank 0 prints its choice and
# why; the run then trains exactly as one given that size (losses, weights
# and batch norm's running statistics bit for bit, ZeRO 1, whose optimizer
# shards follow the buckets: every rank built the same layout, and the
# profile's passes changed nothing); the checkpoint manifest records the
# size and a resumed auto run keeps it; with one rank there is nothing to
# size; with --nooverlap it is refused in one line.
set -u
bin=launch/ddp_train
source tests/lib.sh

resnet18_data 48
common=("${resnet18_flags[@]}" --batch-size 4
        --threads 1 --seed 7 --zero-stage 1 --optimizer sgd --lr 0.02 --momentum 0.9 --log-every 0)
run() {  # run NAME ARGS...
  local name="$1"; shift
  timeout 180 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" "$@" \
    --metrics-file "$tmp/$name.jsonl" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name"; }
}

run auto --bucket-mb auto --steps 4 --save-weights "$tmp/auto.safetensors"
line="$(grep 'bucket-mb auto:' "$tmp/auto.log")"
echo "$line"
[ "$(grep -c 'bucket-mb auto:' "$tmp/auto.log")" = 1 ] || fail "the choice is not printed once (rank 0)"
chosen="$(printf '%s\n' "$line" | sed -n 's/^ddp_train: --bucket-mb auto: \([0-9.]*\) MiB: predicted .* ms at the default 25 MiB (probe: .*/\1/p')"
[ -n "$chosen" ] || fail "no size and reason in: $line"
# CPU ranks: the contention pass's slowdowns, in the reason (none below 0).
grep -qE 'beside [0-9.]+ and [0-9.]+ MiB all-reduces backward \+[0-9]+% and [0-9.]+ ms a collective, all-reduce \+[0-9]+% and [0-9.]+ ms each\)$' <<< "$line" ||
  fail "no contention figures in: $line"
summary_mb="$(tail -1 "$tmp/auto.jsonl" | /usr/bin/python3 -c 'import json,sys; print("%g" % json.load(sys.stdin)["summary"]["bucket_mb"])')"
[ "$summary_mb" = "$chosen" ] || fail "the summary's bucket_mb $summary_mb is not the choice $chosen"

run given --bucket-mb "$chosen" --steps 4 --save-weights "$tmp/given.safetensors"
/usr/bin/python3 tests/compare_losses.py "$tmp/auto.jsonl" "$tmp/given.jsonl" --rtol 0 || fail "losses differ from --bucket-mb $chosen"
tools/compare_weights "$tmp/auto.safetensors" "$tmp/given.safetensors" --rtol 0 ||
  fail "weights or running statistics differ from --bucket-mb $chosen"

# The manifest keeps the size; a resumed auto run reuses it.
run first --bucket-mb auto --steps 2 --checkpoint-dir "$tmp/ck" --checkpoint-every 2
run resumed --bucket-mb auto --steps 4 --checkpoint-dir "$tmp/ck" --resume
grep -q "bucket-mb auto: [0-9.]* MiB, as the run being resumed chose" "$tmp/resumed.log" ||
  { cat "$tmp/resumed.log"; fail "the resumed run did not keep the recorded size"; }
first_mb="$(sed -n 's/^ddp_train: --bucket-mb auto: \([0-9.]*\) MiB: .*/\1/p' "$tmp/first.log")"
grep -q "bucket-mb auto: $first_mb MiB, as the run being resumed chose" "$tmp/resumed.log" ||
  fail "the resumed run's size is not the first run's $first_mb"

out="$("$bin" "${common[@]}" --bucket-mb auto --steps 1 2>&1)" || fail "one rank: $out"
grep -q "bucket-mb auto: one rank, no gradient buckets to size" <<< "$out" || fail "one rank: $out"
out="$("$bin" "${common[@]}" --bucket-mb auto --nooverlap --steps 1 2>&1)" && fail "--nooverlap accepted"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && grep -q "\-\-nooverlap hides none" <<< "$out" ||
  fail "--nooverlap: $out"

finish --pass "all checks passed"
