#!/usr/bin/env bash
# --device-memory-limit on CPU ranks. One rank: the cap is exact. A run
# capped at the peak its uncapped twin reported trains; one byte less ends
# with the out-of-memory line (naming the device, the bytes, the cap, the
# model and --batch-size), exit 1, and no stack trace. Two ranks (whose
# peak depends on when the communication thread allocates beside
# backward): 32 MiB over the peak trains, 32 MiB under it gives that line
# on every rank. A cap below the model's state says that instead of
# suggesting a smaller batch. A bad size is one line naming the flag.
set -u
bin=launch/ddp_train
source tests/lib.sh
common=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 8 --steps 3 --threads 1 --device cpu)
oom="out of memory on cpu asking for [0-9.]* [KMG]*i*B ([0-9.]* [KMG]*i*B in tensors, [0-9.]* [KMG]*i*B reserved, --device-memory-limit [0-9.]* [KMG]*i*B) training resnet18 at --batch-size 8; try a smaller --batch-size"

peak_of() {  # peak_of METRICS: the summary's allocator peak, in bytes
  python3 -c 'import json, sys
print([json.loads(l) for l in open(sys.argv[1])][-1]["summary"]["memory"]["peak_bytes"])' "$1"
}

# launch NAME NP ARGS...: one rank directly, several under mpirun.
launch() {
  local name=$1 np=$2; shift 2
  if [ "$np" -eq 1 ]; then
    timeout 120 "$bin" "${common[@]}" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  else
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" "$@" \
      > "$tmp/$name.out" 2> "$tmp/$name.err"
  fi
}

for np in 1 2; do
  launch "free$np" "$np" --metrics-file "$tmp/free$np.jsonl" || { cat "$tmp/free$np.err"; fail "np $np: uncapped run"; continue; }
  peak=$(peak_of "$tmp/free$np.jsonl")
  margin=$(( np == 1 ? 0 : 32 << 20 ))
  launch "fits$np" "$np" --device-memory-limit "$((peak + margin))" --metrics-file "$tmp/fits$np.jsonl" ||
    { cat "$tmp/fits$np.err"; fail "np $np: capped $margin bytes over its own peak ($peak bytes), the run failed"; }
  if [ "$np" -eq 1 ]; then
    [ -f "$tmp/fits$np.jsonl" ] && [ "$(peak_of "$tmp/fits$np.jsonl")" = "$peak" ] || fail "np 1: the capped run's peak differs"
  fi
  launch "short$np" "$np" --device-memory-limit "$((peak - (np == 1 ? 1 : margin)))"
  rc=$?
  [ "$rc" -eq 1 ] || fail "np $np: under the peak, exit $rc (want 1)"
  grep -q "terminate called\|Check failed\|\*\*\* SIGABRT\|Aborted" "$tmp/short$np.err" && fail "np $np: a crash, not one line"
  if [ "$np" -eq 1 ]; then
    lines=$(grep -c . "$tmp/short$np.err")
    [ "$lines" -eq 1 ] || { cat "$tmp/short$np.err"; fail "np 1: $lines lines on stderr (want the one out-of-memory line)"; }
    grep -q "^ddp_train: error: $oom$" "$tmp/short$np.err" || { cat "$tmp/short$np.err"; fail "np 1: no out-of-memory line"; }
  else
    for rank in 0 1; do
      grep -q "^ddp_train: rank $rank: error: $oom$" "$tmp/short$np.err" ||
        { cat "$tmp/short$np.err"; fail "np 2: rank $rank gave no out-of-memory line"; }
    done
  fi
  echo "np $np: peak $peak bytes; under it: $(grep -m1 'error:' "$tmp/short$np.err")"
done

# A cap below the model's own state: the line says so, not "a smaller
# --batch-size", which could not help.
launch state 1 --device-memory-limit 1MiB
rc=$?
[ "$rc" -eq 1 ] && [ "$(grep -c . "$tmp/state.err")" -eq 1 ] &&
  grep -q "^ddp_train: error: out of memory on cpu asking for .* building resnet18 before its first step: the parameters, gradients and optimizer state alone do not fit; shard them with --zero-stage 2 over more ranks, or give the run more memory$" "$tmp/state.err" ||
  { cat "$tmp/state.err"; fail "a cap below the model's state: exit $rc"; }

# A size that is not one: one line naming the flag, exit 1.
"$bin" "${common[@]}" --device-memory-limit 24XB > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
[ "$rc" -eq 1 ] || fail "bad size: exit $rc"
grep -q "^ddp_train: error: --device-memory-limit '24XB' is not a size; write e.g. 24GiB, 512MiB or 2000000000$" \
  "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "bad size: no line naming the flag"; }
[ "$(grep -c . "$tmp/bad.err")" -eq 1 ] || fail "bad size: more than one line"

finish "device memory limit test"
