#!/usr/bin/env bash
# Ranks that disagree, or one rank that fails alone, never hang: every rank
# exits non-zero with one line naming the problem (mpirun's MPMD syntax
# starts ranks with different flags).
set -u
bin=launch/ddp_train
source tests/lib.sh
base=(--image-size 32 --num-classes 10 --batch-size 2 --steps 2 --threads 1)

expect_all_ranks_fail() {  # expect_all_ranks_fail "<fragment>" -- mpirun arguments...
  local fragment="$1"; shift 2
  local out rc
  out=$(timeout 120 mpirun --oversubscribe --bind-to none "$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "exit $rc (124: hung) for: $*"; echo "$out"; return; fi
  local lines
  lines=$(printf '%s\n' "$out" | grep -c '^ddp_train: rank [01]: error: ')
  if [ "$lines" -ne 2 ]; then fail "expected one error line from each of 2 ranks, got $lines:"; echo "$out"; return; fi
  if ! grep '^ddp_train: rank' <<< "$out" | grep -F -- "$fragment" > /dev/null; then
    fail "expected '$fragment' in:"; echo "$out"; return
  fi
  echo "ok: $(printf '%s\n' "$out" | grep '^ddp_train: rank 0')"
}

expect_all_ranks_fail "ranks disagree on --model: rank 0 has resnet18, rank 1 has resnet34" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet34 "${base[@]}"
expect_all_ranks_fail "ranks disagree on --batch-size: rank 0 has 2, rank 1 has 4" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" --batch-size 4
expect_all_ranks_fail "ranks disagree on --num-classes: rank 0 has 10, rank 1 has 12" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" --num-classes 12
# Flags that pair one rank's collective with another's (evaluation,
# clipping's norm) or let replicas drift apart silently (--lr).
expect_all_ranks_fail "ranks disagree on --eval-every: rank 0 has 0, rank 1 has 1" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" --eval-every 1
expect_all_ranks_fail "ranks disagree on --clip-grad-norm: rank 0 has 0, rank 1 has 1" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" --clip-grad-norm 1
expect_all_ranks_fail "ranks disagree on --lr: rank 0 has 0.10000000000000001, rank 1 has 0.20000000000000001" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" --lr 0.1 : -np 1 "$bin" --model resnet18 "${base[@]}" --lr 0.2
expect_all_ranks_fail "ranks disagree on --lr-schedule: rank 0 has constant, rank 1 has cosine" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" --lr-schedule cosine
# Under --epochs the step count comes from the data: each node reads its own
# copy of the file, compared by path only. Two "nodes" (working directories)
# hold files of the same name with 16 and 24 samples.
mkdir -p "$tmp/node0" "$tmp/node1"
tools/make_image_dataset --out "$tmp/node0/data.safetensors" --samples 16 > /dev/null &&
  tools/make_image_dataset --out "$tmp/node1/data.safetensors" --samples 24 > /dev/null || fail "writing datasets"
epochs=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 2 --epochs 1 --threads 1
        --data tensors:data.safetensors)
expect_all_ranks_fail "ranks disagree on the training data's sample count: rank 0 has 16, rank 1 has 24" -- \
  -np 1 -wdir "$tmp/node0" "$PWD/$bin" "${epochs[@]}" : -np 1 -wdir "$tmp/node1" "$PWD/$bin" "${epochs[@]}"
# One rank fails alone (its weights file is missing): the other stops too.
expect_all_ranks_fail "rank 1 failed: --load-weights $tmp/missing.safetensors: cannot open" -- \
  -np 1 "$bin" --model resnet18 "${base[@]}" : -np 1 "$bin" --model resnet18 "${base[@]}" \
  --load-weights "$tmp/missing.safetensors"
expect_all_ranks_fail "--bucket-mb must be positive (MiB) or auto, got '0'" -- -np 2 "$bin" --model resnet18 "${base[@]}" --bucket-mb 0

# Rank 0 broadcasts its initial parameters and buffers: with weights loaded
# on rank 0 only, training is the same, bit for bit, as when every rank loads
# them (without the broadcast rank 1 would start from its own random init).
"$bin" --model resnet18 "${base[@]}" --seed 9 --steps 1 --save-weights "$tmp/start.safetensors" > /dev/null 2>&1 ||
  fail "writing start weights"
run() {  # run NAME mpirun-arguments...
  local name="$1"; shift
  timeout 120 mpirun --oversubscribe --bind-to none "$@" > "$tmp/$name.log" 2>&1 || { fail "$name run failed"; cat "$tmp/$name.log"; }
}
out=(--metrics-file "$tmp/m.jsonl" --save-weights "$tmp/w.safetensors")
run only_root -np 1 "$bin" --model resnet18 "${base[@]}" --load-weights "$tmp/start.safetensors" "${out[@]}" : \
  -np 1 "$bin" --model resnet18 "${base[@]}" "${out[@]}"
mv "$tmp/m.jsonl" "$tmp/only_root.jsonl"; mv "$tmp/w.safetensors" "$tmp/only_root.safetensors"
run everyone -np 2 "$bin" --model resnet18 "${base[@]}" --load-weights "$tmp/start.safetensors" "${out[@]}"
echo "weights loaded on rank 0 only against every rank loading them:"
/usr/bin/python3 tests/compare_losses.py "$tmp/only_root.jsonl" "$tmp/m.jsonl" ||
  fail "losses differ between weights loaded on rank 0 only and on every rank"
tools/compare_weights "$tmp/only_root.safetensors" "$tmp/w.safetensors" --rtol 0 || fail "weights differ"

finish --pass "all checks passed"
