#!/usr/bin/env bash
# ddp_train's command line: runs that should work do, and every kind of bad
# input gets exactly one clear line naming the flag, file or tensor at
# fault, and a non-zero exit.
set -u
bin="launch/ddp_train"
make_data="tools/make_image_dataset"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_tool_error() {  # expect_tool_error TOOL "<fragment>" args...
  local tool="$1" fragment="$2"; shift 2
  local out rc name
  name=$(basename "$tool")
  out=$(timeout 60 "$tool" "$@" 2>&1); rc=$?  # a hang fails, not blocks
  if [ "$rc" -eq 0 ]; then fail "$name $* exited 0"; return; fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then
    fail "$name $* printed more than one line:"; printf '%s\n' "$out"; return
  fi
  case "$out" in
    *"$fragment"*) echo "ok: $*: $out" ;;
    *) fail "$name $*: expected '$fragment' in: $out" ;;
  esac
}
expect_error() { expect_tool_error "$bin" "$@"; }  # expect_error "<fragment>" args...

small=(--model resnet18 --image-size 32 --batch-size 4 --num-classes 10 --threads 1)

# Files for the checks below: a dataset, weights of a 10-class ResNet-18.
"$make_data" --out "$tmp/train.safetensors" --samples 16 --image-size 32 --num-classes 10 || fail "make_image_dataset"
out=$("$bin" "${small[@]}" --steps 2 --data "tensors:$tmp/train.safetensors" --save-weights "$tmp/r18.safetensors" \
      --metrics-file "$tmp/metrics.jsonl" 2>&1) || { fail "short run: $out"; }
grep -q '^summary: resnet18  1 rank  steps 2 ' <<< "$out" || fail "no summary line in: $out"
[ "$(grep -c '"step"' "$tmp/metrics.jsonl")" -eq 2 ] || fail "metrics file lacks 2 step records"
grep -q '"summary"' <<< "$(tail -n 1 "$tmp/metrics.jsonl")" || fail "metrics file lacks the summary"
# The config file sets flags; the command line overrides it.
printf 'model: "resnet18"\nbatch_size: 4\nsteps: 1\nimage_size: 32\nnum_classes: 10\nthreads: 1\n' > "$tmp/good.cfg"
out=$("$bin" --config "$tmp/good.cfg" --steps 2 2>&1) || fail "config run: $out"
grep -q '^summary: resnet18  1 rank  steps 2 ' <<< "$out" || fail "config + override: $out"
# --help: ddp_train's own flags by group, with defaults (the logging
# library's behind --helpfull); --version: one line each, exit 0.
out=$("$bin" --help 2>&1); rc=$?
{ [ "$rc" -eq 0 ] && grep -q "^What runs:$" <<< "$out" && grep -q "^  --batch-size=8$" <<< "$out" &&
  ! grep -q "logtostderr" <<< "$out"; } || fail "--help: exit $rc: $out"
out=$("$bin" --version 2>&1); rc=$?
{ [ "$rc" -eq 0 ] && [ "$(grep -c . <<< "$out")" -eq 4 ] && grep -q "^ddp_train [0-9.]* (git " <<< "$out"; } ||
  fail "--version: exit $rc: $out"

# Flags.
expect_error "--model 'resnet9000' is unknown; known models: resnet18" --model resnet9000
expect_error "--batch-size must be positive, got 0" --batch-size 0
expect_error "--batch-size must be positive, got -4" --batch-size=-4
expect_error "--accumulation-steps must be positive" --accumulation-steps 0
expect_error "--bucket-mb must be positive (MiB) or auto, got '-1'" --bucket-mb=-1
expect_error "--bucket-mb must be positive (MiB) or auto, got 'big'" --bucket-mb big
expect_error "--bucket-mb auto chooses the size whose all-reduces backward hides best, and --nooverlap hides none" \
  --bucket-mb auto --nooverlap
expect_error "--contention-probe measures ranks against each other: run 2 ranks or more" \
  "${small[@]}" --steps 4 --device cpu --contention-probe "$tmp/probe.json"
expect_error "--contention-probe trains every rank alone: it cannot be used with --metrics-file" \
  --contention-probe "$tmp/probe.json" --metrics-file "$tmp/m.jsonl"
expect_error "--contention-probe trains every rank alone: it cannot be used with --bucket-mb auto" \
  --contention-probe "$tmp/probe.json" --bucket-mb auto
expect_error "--contention-probe-mb must be positive, got 0" --contention-probe-mb 0
expect_error "--grad-compression 'int8' is unknown" --grad-compression int8
expect_error "--zero-stage must be 0, 1, 2 or 3, got 4" --zero-stage 4
expect_error "--zero-gather-dtype fp32 with --zero-stage 3 under --precision bf16: stage 3 gathers each layer's weights in the 16-bit working dtype" \
  --zero-stage 3 --precision bf16 --zero-gather-dtype fp32
expect_error "--zero-prefetch must be 0 to 64 buckets, got -1" --zero-stage 3 --zero-prefetch=-1
expect_error "--optimizer 'adagrad' is unknown; use sgd, adamw or lamb" --optimizer adagrad
expect_error "--lr-schedule 'exponential' is unknown" --lr-schedule exponential
expect_error "--device 'tpu' is unknown" --device tpu
# With no GPU visible (here, or hidden on a GPU machine), --device cuda says so.
CUDA_VISIBLE_DEVICES= expect_error "--device cuda: no GPU is visible (CUDA_VISIBLE_DEVICES='')" \
  "${small[@]}" --steps 1 --device cuda
# On a CPU rank (no GPU visible): GPU-only settings name themselves.
CUDA_VISIBLE_DEVICES= expect_error "--comm nccl needs GPUs, and this rank trains on cpu" "${small[@]}" --steps 1 --comm nccl
CUDA_VISIBLE_DEVICES= expect_error "--precision tf32 is a GPU math mode (tensor cores), and this rank trains on cpu" \
  "${small[@]}" --steps 1 --precision tf32
expect_error "--comm 'gloo' is unknown; use auto, nccl or mpi" --comm gloo
expect_error "--precision 'fp8' is unknown" --precision fp8
CUDA_VISIBLE_DEVICES= expect_error \
  "--precision fp16 is for GPUs, and this rank trains on cpu; use --precision bf16, the CPU's 16-bit type" \
  "${small[@]}" --steps 1 --precision fp16
expect_error "--loss-scale 'big' is neither dynamic, none nor a positive number" --loss-scale big
expect_error "--loss-scale '-8' is neither dynamic, none nor a positive number" --loss-scale=-8
expect_error "--loss-scale-growth-interval must be positive, got 0" --loss-scale-growth-interval 0
expect_error "--max-skipped-share must be in [0, 1], got 2" --max-skipped-share 2
expect_error "--memory-format 'nchw' is unknown; use auto, channels_last or contiguous" --memory-format nchw
expect_error "--zero-gather-dtype 'bf16' is unknown; use auto or fp32" --zero-gather-dtype bf16
expect_error "--lr must be a positive number" --lr nan
expect_error "give --steps or --epochs, not both" --steps 3 --epochs 2
expect_error "--epochs needs a tensors:FILE dataset" "${small[@]}" --epochs 1
expect_error "unknown command line flag 'bogus'" --bogus 1
expect_error "unexpected argument 'extra'" extra
expect_error "leaves one value per channel" --model resnet18 --image-size 32 --batch-size 1

# Config files.
expect_error "--config $tmp/none.cfg: cannot open" --config "$tmp/none.cfg"
printf 'model: "resnet18"\nbatch_szie: 4\n' > "$tmp/typo.cfg"
expect_error "--config $tmp/typo.cfg: line 2" --config "$tmp/typo.cfg"
printf 'model: resnet18 resnet50\n' > "$tmp/bad.cfg"
expect_error "--config $tmp/bad.cfg: line 1" --config "$tmp/bad.cfg"

# Data files.
expect_error "--data $tmp/none.safetensors: cannot open" "${small[@]}" --data "tensors:$tmp/none.safetensors"
head -c 100 "$tmp/train.safetensors" > "$tmp/truncated.safetensors"
expect_error "$tmp/truncated.safetensors: malformed safetensors file" "${small[@]}" --data "tensors:$tmp/truncated.safetensors"
expect_error "--data 'imagenet' is not synthetic, tensors:FILE or imagefolder:DIR" --data imagenet
expect_error "--data 'tokens:x.tokens': tokens:PATH is for BERT models, not image models" --data tokens:x.tokens
expect_error "outside [0, 5) for --num-classes 5" "${small[@]}" --num-classes 5 --data "tensors:$tmp/train.safetensors"
expect_error "fewer than one global batch of 32" "${small[@]}" --batch-size 32 --data "tensors:$tmp/train.safetensors"
# write_images FILE CHANNELS LABEL_DTYPE: two 32x32 zero images and labels,
# a safetensors file of the given image channels and label dtype.
write_images() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
path, channels, label_dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3]
images = 2 * channels * 32 * 32 * 4
end = images + 2 * {"F32": 4, "I64": 8}[label_dtype]
header = {"images": {"dtype": "F32", "shape": [2, channels, 32, 32], "data_offsets": [0, images]},
          "labels": {"dtype": label_dtype, "shape": [2], "data_offsets": [images, end]}}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + bytes(end))
PY
}
write_images "$tmp/f32labels.safetensors" 3 F32
expect_error "tensor 'labels' must be i64 [2], got f32[2]" "${small[@]}" --data "tensors:$tmp/f32labels.safetensors"
write_images "$tmp/gray.safetensors" 1 I64
expect_error "tensor 'images' must be f32 [N, 3, H, H] with N > 0, got f32[2, 1, 32, 32]" "${small[@]}" --data "tensors:$tmp/gray.safetensors"

# Weights files.
expect_error "--load-weights $tmp/none.safetensors: cannot open" "${small[@]}" --load-weights "$tmp/none.safetensors"
expect_error "tensor 'fc.weight' is f32[10, 512], resnet18 expects f32[1000, 512]" \
  --model resnet18 --image-size 32 --load-weights "$tmp/r18.safetensors"
expect_error "missing tensor 'layer1.2.conv1.weight' that resnet34 needs" \
  --model resnet34 --image-size 32 --num-classes 10 --load-weights "$tmp/r18.safetensors"
expect_error "$tmp/train.safetensors: missing tensor 'conv1.weight'" "${small[@]}" --load-weights "$tmp/train.safetensors"
head -c 4000 "$tmp/r18.safetensors" > "$tmp/r18_truncated.safetensors"
expect_error "malformed safetensors file" "${small[@]}" --load-weights "$tmp/r18_truncated.safetensors"
expect_error "--metrics-file /nonexistent/m.jsonl: directory /nonexistent does not exist" "${small[@]}" \
  --metrics-file /nonexistent/m.jsonl
# A NaN pixel is refused at load, naming the sample.
cp "$tmp/train.safetensors" "$tmp/nan.safetensors"
/usr/bin/env python3 - "$tmp/nan.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
start = json.loads(raw[8:8 + n])["images"]["data_offsets"][0]
at = 8 + n + start + 4 * (3 * 32 * 32 * 5 + 7)  # sample 5, element 7
raw[at:at + 4] = struct.pack("<f", float("nan"))
open(path, "wb").write(raw)
PY
expect_error "nan.safetensors: tensor 'images' sample 5 holds NaN (element 7)" "${small[@]}" \
  --data "tensors:$tmp/nan.safetensors"
# Output paths are checked before training starts.
expect_error "--save-weights /nonexistent/w.safetensors: directory /nonexistent does not exist" "${small[@]}" \
  --steps 1000000 --save-weights /nonexistent/w.safetensors
expect_error "r18.safetensors exists and is not a directory" "${small[@]}" --steps 1000000 \
  --checkpoint-dir "$tmp/r18.safetensors/ck"
# No output on an input (links and ./ resolved) or on another output, no
# directory where a file is meant: refused before training, every input's
# bytes unchanged (issue 34, items 5 to 7).
ln -sf "$tmp/train.safetensors" "$tmp/train_link.safetensors"
mkdir -p "$tmp/a_dir"
data_sum=$(md5sum < "$tmp/train.safetensors"); weights_sum=$(md5sum < "$tmp/r18.safetensors")
data=(--data "tensors:$tmp/train.safetensors")
expect_error "--save-weights $tmp/train.safetensors is the --data file $tmp/train.safetensors: writing it would destroy the input" \
  "${small[@]}" "${data[@]}" --steps 1000000 --save-weights "$tmp/train.safetensors"
expect_error "--metrics-file $tmp/train_link.safetensors is the --data file" \
  "${small[@]}" "${data[@]}" --steps 1000000 --metrics-file "$tmp/train_link.safetensors"
expect_error "--timeline $tmp/./train.safetensors is the --data file" \
  "${small[@]}" "${data[@]}" --steps 1000000 --timeline "$tmp/./train.safetensors"
expect_error "--metrics-file $tmp/train.safetensors is the --eval-data file" \
  "${small[@]}" --eval-data "tensors:$tmp/train.safetensors" --steps 1000000 --metrics-file "$tmp/train.safetensors"
expect_error "--save-weights $tmp/r18.safetensors is the --load-weights file" \
  "${small[@]}" --load-weights "$tmp/r18.safetensors" --steps 1000000 --save-weights "$tmp/r18.safetensors"
expect_error "--profile-file $tmp/good.cfg is the --config file" \
  --config "$tmp/good.cfg" --steps 1000000 --profile-file "$tmp/good.cfg"
[ "$(md5sum < "$tmp/train.safetensors")" = "$data_sum" ] || fail "the dataset changed"
[ "$(md5sum < "$tmp/r18.safetensors")" = "$weights_sum" ] || fail "the weights changed"
grep -q "model" "$tmp/good.cfg" || fail "the config changed"
expect_error "--save-weights and --metrics-file are both $tmp/out.x: one would overwrite the other" \
  "${small[@]}" --steps 1000000 --metrics-file "$tmp/out.x" --save-weights "$tmp/out.x"
expect_error "--metrics-file and --timeline are both $tmp/out.x" \
  "${small[@]}" --steps 1000000 --metrics-file "$tmp/out.x" --timeline "$tmp/out.x"
expect_error "--save-weights $tmp/a_dir is a directory; give a file's path" \
  "${small[@]}" --steps 1000000 --save-weights "$tmp/a_dir"
expect_error "--metrics-file $tmp/a_dir is a directory; give a file's path" \
  "${small[@]}" --steps 1000000 --metrics-file "$tmp/a_dir"
[ -e "$tmp/out.x" ] && fail "a refused run wrote $tmp/out.x"
# Inputs must be regular files, read up to their size: a directory, a
# device or a FIFO with no writer is refused at once (issue 34, items 9, 14).
mkfifo "$tmp/fifo"
expect_error "--data $tmp/a_dir is a directory, not a file" "${small[@]}" --data "tensors:$tmp/a_dir"
expect_error "--load-weights $tmp/a_dir is a directory, not a file" "${small[@]}" --load-weights "$tmp/a_dir"
expect_error "--config $tmp/a_dir is a directory, not a file" --config "$tmp/a_dir"
expect_error "--data /dev/zero is not a regular file (a device, FIFO or socket)" "${small[@]}" --data tensors:/dev/zero
expect_error "--load-weights /dev/urandom is not a regular file" "${small[@]}" --load-weights /dev/urandom
expect_error "--data $tmp/fifo is not a regular file" "${small[@]}" --data "tensors:$tmp/fifo"
expect_error "--load-weights $tmp/fifo is not a regular file" "${small[@]}" --load-weights "$tmp/fifo"
expect_error "--prefetch must be in [1, 64] batches, got 2000000000" "${small[@]}" --prefetch 2000000000
# Data files hold to --image-size's floor (item 15).
"$make_data" --out "$tmp/tiny.safetensors" --samples 16 --image-size 8 --num-classes 10 || fail "make_image_dataset 8 px"
expect_error "--data tensors:$tmp/tiny.safetensors: images are 8 pixels square; ResNet needs at least 32" \
  "${small[@]}" --data "tensors:$tmp/tiny.safetensors"
# NaN in loaded weights is named at load, not blamed on the data (item 13).
/usr/bin/env python3 - "$tmp/r18.safetensors" "$tmp/r18_nan.safetensors" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
start = json.loads(raw[8:8 + n])["fc.weight"]["data_offsets"][0]
raw[8 + n + start + 4 * 3:8 + n + start + 4 * 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(raw)
PY
expect_error "--load-weights $tmp/r18_nan.safetensors: tensor 'fc.weight' holds NaN (element 3)" "${small[@]}" \
  --load-weights "$tmp/r18_nan.safetensors"
# --check-flags: the flags' checks alone, no MPI, no training (item 16).
expect_error "--model 'resnet19' is unknown; known models: resnet18" --check-flags --model resnet19
expect_error "--lr must be a positive number, got -1" --check-flags --model resnet18 --lr -1
out=$("$bin" --check-flags "${small[@]}" 2>&1) && [ "$out" = "ddp_train: the flags hold" ] ||
  fail "--check-flags on good flags: $out"
# Sizes that overflow 64 bits, or exhaust host memory, or come to no step:
# one line each, never a hang, SIGFPE or stack trace (issue 34, items 1-4).
expect_error "--batch-size 8 x 3 x --image-size 1000000000 squared overflows a 64-bit element count" \
  --model resnet18 --threads 1 --image-size 1000000000
expect_error "--batch-size 9223372036854775807 x 3 x --image-size 224 squared overflows" \
  --model resnet18 --threads 1 --batch-size 9223372036854775807
expect_error "out of memory on cpu asking for " --model resnet18 --threads 1 --image-size 1000000000 --batch-size 1
expect_error "out of memory on cpu asking for 11.2 TiB" --model resnet18 --threads 1 --image-size 32 \
  --batch-size 999999999
expect_error "the global batch, --batch-size 8 x --accumulation-steps 4611686018427387904 x 1 ranks, overflows" \
  --model resnet18 --threads 1 --accumulation-steps 4611686018427387904
expect_error "--batch-size 4294967296 x --accumulation-steps 4294967296 x 1 ranks, overflows" \
  --model resnet18 --threads 1 --batch-size 4294967296 --accumulation-steps 4294967296
expect_error "--epochs 2305843009213693952 x 4 steps per epoch overflows 64 bits" "${small[@]}" \
  --data "tensors:$tmp/train.safetensors" --steps 0 --epochs 2305843009213693952
expect_error "--steps 9223372036854775807 (9223372036854775807 steps) x the global batch 4 overflows a 64-bit sample count" \
  "${small[@]}" --steps 9223372036854775807
expect_error "--epochs 1152921504606846976 (4611686018427387904 steps) x the global batch 4 overflows a 64-bit sample count" \
  "${small[@]}" --data "tensors:$tmp/train.safetensors" --epochs 1152921504606846976
expect_error "--checkpoint-every needs --checkpoint-dir" "${small[@]}" --checkpoint-every 5
expect_error "--resume needs --checkpoint-dir" "${small[@]}" --resume
expect_error "--comm-timeout-s must be 0 (no timeout) or positive, got -1" "${small[@]}" --comm-timeout-s -1
expect_error "--preemption-grace-s must be 0 (no limit) or positive, got -1" "${small[@]}" --preemption-grace-s -1
expect_error "is far more than the" "${small[@]}" --threads 100000
expect_error "--seq-len must be in [8, 512] (BERT's positions), got 513" --model bert-tiny --seq-len 513 --steps 1
expect_error "--dropout must be in [0, 1), got 1" --model bert-tiny --dropout 1 --steps 1
expect_error "--task 'ner' is unknown; use pretraining, classification or question-answering" --model bert-tiny \
  --task ner --steps 1
# Question answering: SQuAD files through make_squad_tensors, and the
# features' bad input.
squad=tools/make_squad_tensors
qa=(--model bert-tiny --task question-answering --batch-size 1 --steps 1 --threads 1)
printf '%s\n' "[PAD]" "[UNK]" "[CLS]" "[SEP]" "[MASK]" who built it paris the tower "?" > "$tmp/vocab.txt"
squad_json() {  # squad_json FILE QUESTION ANSWER_START [no-answers]
  local answers=', "answers": [{"text": "Paris", "answer_start": '"$3"'}]'
  [ "${4-}" = no-answers ] && answers=""
  printf '{"data": [{"paragraphs": [{"context": "Paris built the tower", "qas": [{"id": "q1", "question": "%s"%s}]}]}]}\n' \
    "$2" "$answers" > "$1"
}
squad_json "$tmp/squad.json" "Who built it?" 0
"$squad" --vocab "$tmp/vocab.txt" --squad "$tmp/squad.json" --seq-len 16 --doc-stride 2 --eval \
  --out "$tmp/qa16.safetensors" > /dev/null || fail "make_squad_tensors"
expect_error "--data $tmp/qa16.safetensors: tensor 'input_ids' holds sequences of 16 tokens, but --seq-len is 32" \
  "${qa[@]}" --seq-len 32 --data "tensors:$tmp/qa16.safetensors"
expect_error "--predictions-file needs --eval-data question answering features with offset_mapping" \
  "${qa[@]}" --data "tensors:$tmp/qa16.safetensors" --predictions-file "$tmp/predictions.tsv"
expect_error "--task question-answering is BERT's; --model resnet18 is an image classifier" "${small[@]}" \
  --task question-answering
expect_error "--predictions-file writes answer spans: it needs --task question-answering" --model bert-tiny \
  --steps 1 --predictions-file "$tmp/predictions.tsv"
/usr/bin/python3 - "$tmp/negative.safetensors" <<'PY'
import json, struct, sys
tensors = {"input_ids": ([2, 8], [101] * 16), "start_positions": ([2], [1, -1]), "end_positions": ([2], [2, 3])}
header, data = {}, b""
for name, (shape, values) in tensors.items():
    header[name] = {"dtype": "I64", "shape": shape, "data_offsets": [len(data), len(data) + 8 * len(values)]}
    data += struct.pack(f"<{len(values)}q", *values)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
expect_error "--data $tmp/negative.safetensors: tensor 'start_positions' element [1] is -1: a position cannot be negative" \
  "${qa[@]}" --data "tensors:$tmp/negative.safetensors"
printf '{"data": [' > "$tmp/broken.json"
expect_tool_error "$squad" "make_squad_tensors: --squad $tmp/broken.json: not valid JSON" --vocab "$tmp/vocab.txt" \
  --squad "$tmp/broken.json" --out "$tmp/x.safetensors"
squad_json "$tmp/no_answers.json" "Who built it?" 0 no-answers
expect_tool_error "$squad" "question 'q1': no 'answers'" --vocab "$tmp/vocab.txt" --squad "$tmp/no_answers.json" \
  --out "$tmp/x.safetensors"
squad_json "$tmp/outside.json" "Who built it?" 3
expect_tool_error "$squad" "question 'q1': answer 'Paris' at character 3 is not in its context" \
  --vocab "$tmp/vocab.txt" --squad "$tmp/outside.json" --out "$tmp/x.safetensors"
squad_json "$tmp/long.json" "Who built the tower who built it?" 0
expect_tool_error "$squad" "question 'q1' takes 8 tokens, leaving its context no room in a window of --seq-len 8" \
  --vocab "$tmp/vocab.txt" --squad "$tmp/long.json" --seq-len 8 --out "$tmp/x.safetensors"
expect_error "$tmp/train.safetensors: no tensor 'input_ids' (i64 [N, T])" --model bert-tiny --steps 1 \
  --data "tensors:$tmp/train.safetensors"
expect_error "--cuda-graphs replays GPU work, and this rank trains on cpu; drop --cuda-graphs" \
  "${small[@]}" --steps 1 --cuda-graphs

# The memory planner: a table and a record, the fit of a given batch, and
# its input errors.
out=$("$bin" --model resnet18 --image-size 64 --num-classes 10 --plan-memory 400MiB --plan-device cpu \
      --plan-overhead 0 --metrics-file "$tmp/plan.json" 2>&1) || fail "plan: $out"
grep -q '^  the largest --batch-size that fits 400.0 MiB is [0-9]* (' <<< "$out" || fail "plan's largest batch: $out"
largest=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['plan']['largest_batch'])" "$tmp/plan.json")
[ "$largest" -gt 8 ] 2>/dev/null || fail "plan record's largest_batch: $(cat "$tmp/plan.json")"
out=$("$bin" --model resnet18 --image-size 64 --num-classes 10 --plan-memory 400MiB --plan-device cpu \
      --plan-overhead 0 --batch-size $((largest + 1)) 2>&1) || fail "plan with --batch-size: $out"
grep -q "^  --batch-size $((largest + 1)) does not fit 400.0 MiB: it needs .* too much$" <<< "$out" ||
  fail "plan's fit check: $out"
# 0 of any unit is no overhead, as 0 is.
zero=$("$bin" --model resnet18 --image-size 64 --num-classes 10 --plan-memory 400MiB --plan-device cpu \
       --plan-overhead 0B 2>&1) || fail "plan with --plan-overhead 0B: $zero"
grep -q "^  the largest --batch-size that fits 400.0 MiB is $largest (" <<< "$zero" || fail "--plan-overhead 0B: $zero"
# A budget past what any activation allows: the batch past the bound is
# said to be past it, with no size made up for it (null in the record).
out=$("$bin" --model resnet18 --image-size 32 --num-classes 10 --plan-memory 1e18 --plan-device cpu \
      --metrics-file "$tmp/bound.json" 2>&1) || fail "plan of 1e18 bytes: $out"
grep -q "^  the largest --batch-size that fits .* is [0-9]* ([0-9.]* GiB); at [0-9]* an activation would pass the 2^31 - 1 elements a step may hold, whatever the memory$" <<< "$out" ||
  fail "plan of 1e18 bytes: $out"
python3 -c "import json, sys
p = json.load(open(sys.argv[1]))['plan']
past = [x for x in p['probes'] if x['batch'] >= p['activation_bound_batch']]
assert past and all(x['peak_bytes'] is None and not x['fits'] for x in past), p['probes']
assert all(x['peak_bytes'] > 0 for x in p['probes'] if x not in past)" "$tmp/bound.json" ||
  fail "plan record's probes past the bound: $(cat "$tmp/bound.json")"
expect_error "--plan-memory '24XB' is not a size; write e.g. 24GiB, 512MiB or 2000000000" --plan-memory 24XB
expect_error "--plan-memory 1.0 GiB: no batch fits; the model's state alone (parameters, gradients, optimizer state) " \
  --model bert-large --plan-memory 1GiB
expect_error "--device meta plans memory and computes no values: --load-weights needs real ones; drop it for the plan" \
  --device meta --load-weights "$tmp/r18.safetensors"
expect_error "--device meta plans memory and computes no values: --checkpoint-dir needs real ones" \
  --plan-memory 24GiB --checkpoint-dir "$tmp/ckpt"
expect_error "--plan-memory plans on the meta device, not --device cpu" --plan-memory 24GiB --device cpu
expect_error "--precision fp16 trains on GPUs only: plan it with --plan-device cuda" --plan-memory 24GiB \
  --precision fp16 --plan-device cpu

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all checks passed"
