#!/usr/bin/env bash
# imagefolder:DIR end to end, on a JPEG folder generated here (4 classes of
# hue and stripes at three sizes, some PNG, grayscale and CMYK files, one
# four corrupt files):
# - ResNet-18 learns it to >= 90% held-out accuracy; each corrupt file is
#   named once and counted once per epoch in the metrics;
# - 2 ranks under mpirun equal 1 rank with 2 accumulated micro-batches, bit
#   for bit (random crops and flips keyed by sample, not rank; corrupt
#   files replaced alike), with 1 and 3 loader threads; a run killed while
#   writing a checkpoint resumes with the same sample stream, bit for bit;
# - a loader slowed on purpose (a test hook) gets the input-wait warning,
#   and one slowed less than the step is hidden by prefetching;
# - a missing directory, an empty class folder, a folder of non-images and
#   a held-out folder with other classes each end with one line.
set -u
bin=launch/ddp_train
source tests/lib.sh

# 4 x 95 images and 4 corrupt files: 384 samples, 24 whole batches of 16,
# so every epoch meets each corrupt file once.
tools/make_image_folder --out "$tmp/train" --classes 4 --per-class 95 --sizes 64x48,48x64,80x60 --corrupt 4 ||
  exit 1
# Held out: other images of the same classes, in colour (a grayscale image
# keeps only the stripes, which the hue outweighs in what the model learns).
tools/make_image_folder --out "$tmp/val" --classes 4 --per-class 25 --first-index 100000 --sizes 64x48,56x56,48x64 \
  --gray-share 0 || exit 1
common=(--model resnet18 --num-classes 4 --image-size 32 --threads 1 --seed 3 --crop-scale 0.35,1
        --data "imagefolder:$tmp/train")

# Learns, and the corrupt file is skipped, named once, counted each epoch.
"$bin" "${common[@]}" --batch-size 16 --epochs 3 --lr 0.05 --lr-schedule cosine --warmup-steps 5 --zero-init-residual \
  --threads 2 --eval-data "imagefolder:$tmp/val" \
  --metrics-file "$tmp/learn.jsonl" > "$tmp/learn.log" 2>&1 || { cat "$tmp/learn.log"; fail "training run"; }
/usr/bin/python3 - "$tmp/learn.jsonl" <<'PY' || fail "held-out accuracy or replaced count"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
summary = records[-1]["summary"]
steps = [r for r in records if "step" in r]
print(f"eval accuracy {summary['eval_accuracy']:.4f} (bar 0.90, chance 0.25), "
      f"replaced {summary['replaced_samples']} over 3 epochs, input wait {100 * summary['input_wait_share']:.2f}%")
ok = summary["eval_accuracy"] >= 0.90 and summary["replaced_samples"] == 12
ok = ok and sum(r.get("replaced_samples", 0) for r in steps) == 12 and all("input_wait_s" in r for r in steps)
sys.exit(0 if ok else 1)
PY
for k in 00 01 02 03; do
  [ "$(grep -c "warning: --data imagefolder:$tmp/train: skipping $tmp/train/class_00/corrupt_$k.jpg: corrupt JPEG" \
      "$tmp/learn.log")" = 1 ] || { cat "$tmp/learn.log"; fail "corrupt_$k.jpg was not named exactly once"; }
done

# 2 ranks against 1 rank with 2 micro-batches.
equivalence() {  # equivalence LOADER_THREADS
  local t="$1" run=(--batch-size 4 --steps 4 --lr 0.02 --zero-init-residual --loader-threads "$1")
  timeout 180 mpirun -np 2 --oversubscribe --bind-to none "$bin" "${common[@]}" "${run[@]}" \
    --metrics-file "$tmp/np2_$t.jsonl" --save-weights "$tmp/np2_$t.safetensors" > "$tmp/np2_$t.log" 2>&1 ||
    { cat "$tmp/np2_$t.log"; fail "2 ranks, $t loader threads"; return; }
  "$bin" "${common[@]}" "${run[@]}" --accumulation-steps 2 --metrics-file "$tmp/np1_$t.jsonl" \
    --save-weights "$tmp/np1_$t.safetensors" > "$tmp/np1_$t.log" 2>&1 ||
    { cat "$tmp/np1_$t.log"; fail "1 rank, $t loader threads"; return; }
  echo "2 ranks vs 1 rank with 2 micro-batches, $t loader threads:"
  /usr/bin/python3 tests/compare_losses.py "$tmp/np1_$t.jsonl" "$tmp/np2_$t.jsonl" --rtol 0 || fail "losses differ ($t)"
  tools/compare_weights "$tmp/np1_$t.safetensors" "$tmp/np2_$t.safetensors" --rtol 0 --exclude running_,num_batches_tracked ||
    fail "weights differ ($t)"
}
equivalence 1
equivalence 3
# The replaced count agrees too (whether or not the corrupt file fell in
# these steps).
a=$(grep -o '"replaced_samples":[0-9]*' "$tmp/np1_1.jsonl" | tail -1)
b=$(grep -o '"replaced_samples":[0-9]*' "$tmp/np2_1.jsonl" | tail -1)
[ "$a" = "$b" ] || fail "replaced counts differ: $a vs $b"

# Resumable: a run killed while writing the checkpoint of step 4 resumes
# from step 2's with the sample stream (crops, flips, replacements) of the
# run never stopped, bit for bit.
run=(--batch-size 4 --steps 4 --lr 0.02 --zero-init-residual --loader-threads 2 --accumulation-steps 2)
DDP_TEST_CHECKPOINT_CRASH=files:0:4 "$bin" "${common[@]}" "${run[@]}" --checkpoint-dir "$tmp/ckpt" \
  --checkpoint-every 2 --metrics-file "$tmp/resumed.jsonl" > "$tmp/crashed.log" 2>&1 &&
  { cat "$tmp/crashed.log"; fail "the crash hook did not fire"; }
"$bin" "${common[@]}" "${run[@]}" --checkpoint-dir "$tmp/ckpt" --checkpoint-every 2 --resume \
  --metrics-file "$tmp/resumed.jsonl" --save-weights "$tmp/resumed.safetensors" > "$tmp/resumed.log" 2>&1 ||
  { cat "$tmp/resumed.log"; fail "resumed run"; }
grep -q "continuing from .* at step 2" "$tmp/resumed.log" || { cat "$tmp/resumed.log"; fail "did not resume at step 2"; }
echo "resumed at step 2 vs never stopped:"
/usr/bin/python3 tests/compare_losses.py "$tmp/np1_1.jsonl" "$tmp/resumed.jsonl" --rtol 0 || fail "resumed losses differ"
tools/compare_weights "$tmp/np1_1.safetensors" "$tmp/resumed.safetensors" --rtol 0 || fail "resumed weights differ"

# A loader slower than the step warns; one faster is hidden by prefetching.
DDP_TEST_SLOW_LOADER_MS=600 "$bin" "${common[@]}" --batch-size 8 --steps 8 > "$tmp/slow.log" 2>&1 ||
  { cat "$tmp/slow.log"; fail "slowed run"; }
grep -q "^ddp_train: warning: waiting for input took [0-9.]*% of step time over [0-9]* steps (above 5%): the data loader is the bottleneck; raise --loader-threads (now 1) or --prefetch (now 2)$" \
  "$tmp/slow.log" || { cat "$tmp/slow.log"; fail "no input-wait warning"; }
echo "slowed loader: $(grep 'waiting for input' "$tmp/slow.log")"
DDP_TEST_SLOW_LOADER_MS=20 "$bin" "${common[@]}" --batch-size 8 --steps 8 --prefetch 3 > "$tmp/hidden.log" 2>&1 ||
  fail "lightly slowed run"
grep -q "waiting for input" "$tmp/hidden.log" && { cat "$tmp/hidden.log"; fail "20 ms per batch was not hidden"; }

# Bad folders: one line each, exit 1.
refuse() {  # refuse PATTERN ARGS...
  local pattern="$1"; shift
  local out rc
  out=$("$bin" --model resnet18 --image-size 32 --batch-size 2 --steps 1 --threads 1 "$@" 2>&1); rc=$?
  if [ "$rc" -ne 1 ] || [ "$(printf '%s\n' "$out" | grep -c .)" -ne 1 ] || ! grep -qF -- "$pattern" <<< "$out"; then
    fail "expected exit 1 and one line with '$pattern', got exit $rc:"; printf '%s\n' "$out"
  else
    echo "refused: $out"
  fi
}
mkdir -p "$tmp/empty_class/a" "$tmp/empty_class/b" "$tmp/texts/a"
jpeg=$(ls "$tmp"/train/class_01/*.jpg | sed -n 1p)
cp "$jpeg" "$tmp/empty_class/a/"
echo "words" > "$tmp/texts/a/notes.txt"
refuse "--data imagefolder:$tmp/nowhere: no such directory" --num-classes 2 --data "imagefolder:$tmp/nowhere"
refuse "class folder $tmp/empty_class/b holds no .jpg, .jpeg or .png files" --num-classes 2 \
  --data "imagefolder:$tmp/empty_class"
refuse "class folder $tmp/texts/a holds no .jpg, .jpeg or .png files" --num-classes 2 --data "imagefolder:$tmp/texts"
refuse "has 4 class folders, --num-classes is 10: give --num-classes 4" --num-classes 10 --data "imagefolder:$tmp/train"
mkdir -p "$tmp/other_val/class_00" "$tmp/other_val/class_09"
cp "$jpeg" "$tmp/other_val/class_00/"; cp "$jpeg" "$tmp/other_val/class_09/"
refuse "--eval-data imagefolder:$tmp/other_val: class 1 is 'class_09', the training data's is 'class_01'" \
  --num-classes 4 --data "imagefolder:$tmp/train" --eval-data "imagefolder:$tmp/other_val"
refuse "--crop-scale '0.5' is not MIN,MAX with 0 < MIN <= MAX <= 1" --crop-scale 0.5
refuse "--prefetch must be in [1, 64] batches, got 0" --prefetch 0

# Held-out data that does not decode is refused at start-up, in one line,
# before any training (issue 34, item 8); so is training data.
mkdir -p "$tmp/bad_val/class_00" "$tmp/bad_val/class_01" "$tmp/bad_val/class_02" "$tmp/bad_val/class_03"
for i in 0 1 2 3 4 5; do printf 'not an image %s' "$i" > "$tmp/bad_val/class_0$((i % 4))/bad_$i.jpg"; done
refuse_with_warnings() {  # as refuse, past the loader's warning a file
  local pattern="$1"; shift
  local out rc
  out=$("$bin" --model resnet18 --image-size 32 --batch-size 2 --steps 1 --threads 1 "$@" 2>&1); rc=$?
  if [ "$rc" -ne 1 ] || [ "$(grep -c "error:" <<< "$out")" -ne 1 ] || ! grep -qF -- "$pattern" <<< "$out" ||
     grep -q "^step \|summary:" <<< "$out"; then
    fail "expected exit 1, no step and one error line with '$pattern', got exit $rc:"; printf '%s\n' "$out"
  else
    echo "refused: $(grep "error:" <<< "$out")"
  fi
}
refuse_with_warnings "error: --eval-data imagefolder:$tmp/bad_val: 6 files in a row do not decode" \
  --num-classes 4 --data "imagefolder:$tmp/train" --eval-data "imagefolder:$tmp/bad_val"
refuse_with_warnings "error: --data imagefolder:$tmp/bad_val: 6 files in a row do not decode" \
  --num-classes 4 --data "imagefolder:$tmp/bad_val"

# Held-out data that stops decoding during training costs no training: the
# weights are written before the final evaluation fails.
rm -rf "$tmp/late_val" "$tmp/late_val_bad" "$tmp/late_val_good"
cp -r "$tmp/train" "$tmp/late_val"; cp -r "$tmp/train" "$tmp/late_val_bad"
find "$tmp/late_val_bad" -type f -exec sh -c 'printf "gone bad" > "$1"' _ {} \;
rm -f "$tmp/saved_first.safetensors"
"$bin" --model resnet18 --image-size 32 --batch-size 2 --steps 100 --threads 1 --num-classes 4 \
  --data "imagefolder:$tmp/train" --eval-data "imagefolder:$tmp/late_val" --log-every 1 \
  --save-weights "$tmp/saved_first.safetensors" > "$tmp/late.log" 2>&1 &
run=$!
for _ in $(seq 1 600); do grep -q "^step *1/100" "$tmp/late.log" && break; sleep 0.1; done
mv "$tmp/late_val" "$tmp/late_val_good" && mv "$tmp/late_val_bad" "$tmp/late_val"  # the same paths, gone bad
wait "$run"; rc=$?
[ "$rc" -eq 1 ] && grep -q "error: --eval-data imagefolder:$tmp/late_val: .* do not decode" "$tmp/late.log" ||
  { cat "$tmp/late.log"; fail "--eval-data gone bad during training: exit $rc"; }
/usr/bin/python3 - "$tmp/saved_first.safetensors" <<'PY' || fail "the weights were not written before the failed evaluation"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
sys.exit(0 if "fc.weight" in header and "conv1.weight" in header else 1)
PY

finish "imagefolder test"
