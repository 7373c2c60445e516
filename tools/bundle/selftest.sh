#!/bin/sh
# The GPU self-test: every GPU check of ddp_train in one run, in tiers, each
# with its own time limit, printing as it goes and rewriting report.json and
# report.md in OUT_DIR after every tier, so a run cut short still reports
# what it found.
#
#   selftest.sh [OUT_DIR]      (default: ./selftest-out)
#
# Tiers: versions (driver, GPU, CUDA runtime, cuDNN, cuBLASLt, NCCL found
# against built; libraries that fail to load, by name) -> GPU op tests (every
# case of gpu_tests, 1 rank, then the 2-rank cases) -> 1-rank training (a
# ddp_train run over NCCL) -> equivalence (2 ranks on the one GPU with
# --comm mpi against 1 rank with 2 accumulated micro-batches, ZeRO stages 0,
# 1 and 2) -> BERT (bert-tiny 2 ranks against 1 with accumulation, ZeRO 0
# and 2; bert-base tokens/s against eager PyTorch) -> mixed precision (fp16 with dynamic loss scaling: a step made
# to overflow is skipped and the scale halves; bf16 trains) -> data (an
# imagefolder run with a corrupt file; tokenize_text against transformers'
# BertTokenizer) -> BERT interop -> benchmarks
# (ResNet-50 images/s and peak memory at fp32 and TF32, batch 64, and at
# fp16 and bf16, batch 128, 224^2, against PyTorch eager (AMP with
# channels-last for 16-bit) in the same run when python3 has torch).
#
# Exit status: 0 when every check passed, 1 when one failed, 3 when no GPU is
# visible (one line says so).
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/env.sh"
OUT=$(mkdir -p "${1:-selftest-out}" && cd "${1:-selftest-out}" && pwd)
LOG="$OUT/selftest.log"
: > "$LOG"
TIERS=""        # JSON objects, comma-separated
MD=""           # report.md body
FAILED=0

say() { printf '%s\n' "$*" | tee -a "$LOG"; }
json_string() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | tr '\n\t' '  '; }
write_report() {
  printf '{"bundle": "%s", "passed": %s, "tiers": [%s]}\n' "$(cat "$B/VERSION")" \
    "$([ "$FAILED" -eq 0 ] && echo true || echo false)" "$TIERS" > "$OUT/report.json"
  printf '# ddp_train GPU self-test\n\nbundle %s\n\n%s\n' "$(cat "$B/VERSION")" "$MD" > "$OUT/report.md"
}
# tier NAME STATUS(passed|failed|skipped) SECONDS DETAILS_JSON MARKDOWN
tier() {
  [ "$2" = failed ] && FAILED=1
  TIERS="${TIERS:+$TIERS, }{\"tier\": \"$1\", \"status\": \"$2\", \"seconds\": $3, \"details\": $4}"
  MD="$MD
## $1: $2 ($3 s)

$5
"
  write_report
  say "selftest: tier $1: $2 ($3 s)"
}
now() { date +%s; }
# The tiers share a budget (DDP_SELFTEST_BUDGET_S, default 420 s, which
# with the machine's start fits a 15-minute device session): each gets its
# own limit, cut to what is left.
DEADLINE=$(( $(now) + ${DDP_SELFTEST_BUDGET_S:-420} ))
limit() {  # limit SECONDS: the smaller of SECONDS and the time left (at least 1)
  left=$(( DEADLINE - $(now) ))
  [ "$left" -lt 1 ] && left=1
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

# ---------------------------------------------------------------- versions
start=$(now)
missing=""
for p in "$B"/libexec/*; do
  m=$("$B/lib/ld-linux-x86-64.so.2" --library-path "$DDP_BUNDLE_LIBRARY_PATH" --list "$p" 2>&1 |
      sed -n -e 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' \
             -e 's/.*error while loading shared libraries: \([^:]*\):.*/\1/p' | sort -u | tr '\n' ' ')
  [ -n "$m" ] && missing="$missing $(basename "$p"): $m;"
done
info=$(timeout "$(limit 30)" "$B/bin/gpu_info" 2>>"$LOG"); info_rc=$?
built=$(cat "$B/built_versions.json" 2>/dev/null || echo '{}')
if [ -n "$missing" ]; then
  say "selftest: libraries that do not load:$missing"
  tier versions failed $(( $(now) - start )) "{\"missing\": \"$(json_string "$missing")\", \"built\": $built}" \
    "Libraries not found:$missing (set DDP_CUDA_LIBS to the folders holding them)"
  exit 1
fi
if [ "$info_rc" -eq 3 ]; then
  say "selftest: no GPU visible to this process (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-unset}'): nothing to test"
  TIERS="{\"tier\": \"versions\", \"status\": \"skipped\", \"seconds\": 0, \"details\": $info}"
  MD="No GPU visible."
  write_report
  exit 3
fi
if [ "$info_rc" -ne 0 ]; then
  tier versions failed $(( $(now) - start )) "{\"exit\": $info_rc}" "gpu_info exited with $info_rc; see selftest.log"
  exit 1
fi
say "selftest: $info"
if ! command -v python3 >/dev/null 2>&1; then
  tier versions failed $(( $(now) - start )) "$info" "python3 is needed for the later tiers"
  exit 1
fi
PY=python3
mismatch=$($PY - "$info" <<'EOF'
import json, sys
v = json.loads(sys.argv[1])
print("; ".join(f"{k} found {v[k]['found']}, built {v[k]['built']}"
                for k in ("cudnn", "cublaslt", "nccl") if v[k]["found"] != v[k]["built"]))
EOF
)
tier versions passed $(( $(now) - start )) "$info" "\`$info\`${mismatch:+

Version differences (same major release, so the ABI holds): $mismatch}"

# ------------------------------------------------------------ GPU op tests
start=$(now)
timeout "$(limit 120)" "$B/bin/gpu_tests" --gtest_output="json:$OUT/gpu_tests.json" >>"$LOG" 2>&1
rc1=$?
timeout "$(limit 30)" "$B/bin/mpirun" -np 2 --bind-to none "$B/bin/gpu_tests" \
  --gtest_filter='StagedCommunicatorTest.*:NcclCommunicatorTest.CreateFailing*' \
  --gtest_output="json:$OUT/gpu_tests_np2.json" >>"$LOG" 2>&1
rc2=$?
counts=$($PY - "$OUT/gpu_tests.json" "$OUT/gpu_tests_np2.json" <<'EOF'
import json, sys
passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
    try:
        report = json.load(open(path))
    except Exception:
        failed += 1
        failures.append(f"{path}: no result")
        continue
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite['name']}.{case['name']}"
            if case.get("failures"):
                failed += 1
                failures.append(name)
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                skipped += 1
            else:
                passed += 1
print(json.dumps({"passed": passed, "failed": failed, "skipped": skipped, "failures": failures}))
EOF
)
status=passed
case "$counts" in *'"failed": 0'*) ;; *) status=failed ;; esac
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] || status=failed
tier gpu_tests "$status" $(( $(now) - start )) "$counts" "Cases: \`$counts\` (exit $rc1 alone, $rc2 under mpirun -np 2)"

# --------------------------------------------------------- 1-rank training
start=$(now)
smoke="$OUT/smoke.jsonl"
timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda --comm nccl --deterministic --batch-size 32 \
  --image-size 64 --num-classes 10 --steps 6 --metrics-file "$smoke" >>"$LOG" 2>&1
rc=$?
line=$(grep '"summary"' "$smoke" 2>/dev/null | tail -n 1)
if [ "$rc" -eq 0 ] && [ -n "$line" ]; then status=passed; else status=failed; fi
# GPU health: the PCIe link read from sysfs and NVML sampled (the summary's
# gpu_health; its start line is in selftest.log).
case "$line" in *'"gpu_health"'*'"pcie"'*) ;; *) status=failed ;; esac
# The same run on the fallback allocator (cudaMalloc blocks cached by size).
DDP_CUDA_ALLOCATOR=caching timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda --deterministic \
  --batch-size 32 --image-size 64 --num-classes 10 --steps 6 --metrics-file "$OUT/smoke_caching.jsonl" >>"$LOG" 2>&1
caching_rc=$?
if [ "$caching_rc" -ne 0 ] || ! $PY "$B/tools/compare_losses.py" "$smoke" "$OUT/smoke_caching.jsonl" >>"$LOG" 2>&1; then
  status=failed
fi
# --cuda-graphs: the same run replayed from a captured graph (its NCCL
# all-reduces inside) gives the same losses bit for bit.
timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda --comm nccl --deterministic --batch-size 32 \
  --image-size 64 --num-classes 10 --steps 6 --cuda-graphs --metrics-file "$OUT/smoke_graphs.jsonl" >>"$LOG" 2>&1
graphs_rc=$?
if [ "$graphs_rc" -ne 0 ] || ! $PY "$B/tools/compare_losses.py" "$smoke" "$OUT/smoke_graphs.jsonl" >>"$LOG" 2>&1; then
  status=failed
fi
# bf16 sends bf16 gradients (--grad-compression auto): the replayed
# all-reduce's casts to and from the wire must replay too for the losses to
# match the eager run's.
for g in "" --cuda-graphs; do
  # shellcheck disable=SC2086
  timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda --comm nccl --deterministic --precision bf16 \
    --batch-size 32 --image-size 64 --num-classes 10 --steps 6 $g --metrics-file "$OUT/smoke_bf16${g:+_graphs}.jsonl" \
    >>"$LOG" 2>&1 || graphs_rc=1
done
$PY "$B/tools/compare_losses.py" "$OUT/smoke_bf16.jsonl" "$OUT/smoke_bf16_graphs.jsonl" >>"$LOG" 2>&1 || status=failed
[ "$graphs_rc" -eq 0 ] || status=failed
# Out of memory: one line naming the bytes, the model and --batch-size.
oom=$(timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet50 --device cuda --batch-size 4096 --steps 1 2>&1)
oom_rc=$?
oom_line=$(printf '%s\n' "$oom" | tail -n 1)
oom_ok=false
if [ "$oom_rc" -eq 1 ] && [ "$(printf '%s\n' "$oom" | grep -c .)" -le 2 ]; then
  case "$oom_line" in *"CUDA out of memory"*"resnet50 at --batch-size 4096"*"smaller --batch-size"*) oom_ok=true ;; esac
fi
[ "$oom_ok" = true ] || status=failed
# NCCL's wait watchdog, as far as one rank shows it: the GPU kept busy
# past --comm-timeout-s at step 2 (what a collective that never finishes
# looks like to the host) ends the run, exit 1, with one line; within the
# start-up, the timeout and 10 s.
stall_start=$(now)
stall=$(DDP_TEST_BUSY_GPU=0:2 timeout "$(limit 60)" "$B/bin/ddp_train" --model resnet18 --device cuda --comm nccl \
  --batch-size 8 --image-size 32 --num-classes 10 --steps 4 --comm-timeout-s 3 2>&1)
stall_rc=$?
stall_s=$(( $(now) - stall_start ))
printf '%s\n' "$stall" >> "$LOG"
stall_line=$(printf '%s\n' "$stall" | grep 'error:' | tail -n 1)
stall_ok=false
if [ "$stall_rc" -eq 1 ] && [ "$stall_s" -le 40 ]; then
  case "$stall_line" in *"past DDP_NCCL_TIMEOUT_S"*) stall_ok=true ;; esac
fi
[ "$stall_ok" = true ] || status=failed
tier training "$status" $(( $(now) - start )) \
  "{\"summary\": ${line:-null}, \"exit\": $rc, \"oom_line\": \"$(json_string "$oom_line")\", \"oom_ok\": $oom_ok, \"stall_ok\": $stall_ok, \"stall_s\": $stall_s}" \
  "ddp_train ResNet-18 on the GPU through NCCL (1 rank), exit $rc: \`${line:-no summary}\`; the same on the
cudaMalloc cache (DDP_CUDA_ALLOCATOR=caching), exit $caching_rc, and with --cuda-graphs, exit $graphs_rc: losses
equal bit for bit, see selftest.log

Out of memory (ResNet-50, batch 4096), exit $oom_rc: \`$oom_line\`

GPU kept busy past --comm-timeout-s 3 (DDP_TEST_BUSY_GPU=0:2), exit $stall_rc after $stall_s s: \`$stall_line\`"

# ------------------------------------------------------------- equivalence
start=$(now)
data="$OUT/data.safetensors"
"$B/bin/make_image_dataset" --out "$data" --samples 96 --image-size 32 --num-classes 10 >>"$LOG" 2>&1
common="--model resnet18 --image-size 32 --num-classes 10 --data tensors:$data --steps 2 --batch-size 4 --lr 0.02
        --momentum 0.9 --weight-decay 1e-4 --zero-init-residual --seed 5 --device cuda --deterministic
        --bucket-mb 4 --first-bucket-mb 0.3"
eq_status=passed
eq_md=""
run_eq() {  # run_eq NAME NP ARGS...
  name=$1; np=$2; shift 2
  # shellcheck disable=SC2086
  if [ "$np" -eq 1 ]; then
    timeout "$(limit 30)" "$B/bin/ddp_train" $common "$@" --metrics-file "$OUT/$name.jsonl" \
      --save-weights "$OUT/$name.safetensors" >>"$LOG" 2>&1
  else
    timeout "$(limit 30)" "$B/bin/mpirun" -np "$np" --bind-to none "$B/bin/ddp_train" $common --comm mpi "$@" \
      --metrics-file "$OUT/$name.jsonl" --save-weights "$OUT/$name.safetensors" >>"$LOG" 2>&1
  fi
}
compare_eq() {  # compare_eq A B WHAT
  if out=$($PY "$B/tools/compare_losses.py" "$OUT/$1.jsonl" "$OUT/$2.jsonl" --rtol 1e-4 2>&1) &&
     wout=$("$B/bin/compare_weights" "$OUT/$1.safetensors" "$OUT/$2.safetensors" --rtol 1e-5 \
            --exclude running_,num_batches_tracked 2>&1); then
    eq_md="$eq_md
- $3: passed. $out; $wout"
  else
    eq_status=failed
    eq_md="$eq_md
- $3: FAILED. ${out:-} ${wout:-}"
  fi
}
run_eq one 1 --accumulation-steps 2 || eq_status=failed
for stage in 0 1 2; do
  run_eq "two_zero$stage" 2 --zero-stage "$stage" || { eq_status=failed; eq_md="$eq_md
- ZeRO $stage: the 2-rank run failed (see selftest.log)"; continue; }
done
compare_eq one two_zero0 "2 ranks (--comm mpi, one GPU) vs 1 rank with 2 accumulated micro-batches"
compare_eq two_zero0 two_zero1 "ZeRO stage 1 vs stage 0 at 2 ranks"
compare_eq two_zero0 two_zero2 "ZeRO stage 2 vs stage 0 at 2 ranks"
tier equivalence "$eq_status" $(( $(now) - start )) "{\"status\": \"$eq_status\"}" "$eq_md"

# -------------------------------------------------------------------- BERT
# bert-tiny on the GPU (fp32, dropout on, padded synthetic sequences through
# the batch stager): 2 ranks (--comm mpi) against 1 rank with 2 accumulated
# micro-batches at ZeRO 0 and 2; then bert-base's tokens/s and peak memory,
# seq 128, batch 32, against eager PyTorch fp32 in the same run.
start=$(now)
common="--model bert-tiny --data synthetic --seq-len 64 --steps 3 --batch-size 8 --optimizer adamw --lr 1e-3
        --dropout 0.1 --seed 5 --device cuda --deterministic --bucket-mb 4 --first-bucket-mb 0.3"
eq_status=passed
eq_md=""
run_eq bert_one 1 --accumulation-steps 2 || eq_status=failed
for stage in 0 2; do
  run_eq "bert_two_zero$stage" 2 --zero-stage "$stage" || { eq_status=failed; eq_md="$eq_md
- BERT ZeRO $stage: the 2-rank run failed (see selftest.log)"; continue; }
done
compare_eq bert_one bert_two_zero0 "bert-tiny: 2 ranks (--comm mpi, one GPU) vs 1 rank with 2 accumulated micro-batches"
compare_eq bert_two_zero0 bert_two_zero2 "bert-tiny: ZeRO stage 2 vs stage 0 at 2 ranks"
m="$OUT/bench_bert_base.jsonl"
timeout "$(limit 60)" "$B/bin/ddp_train" --model bert-base --device cuda --batch-size 32 --seq-len 128 --steps 12 \
  --optimizer adamw --metrics-file "$m" >>"$LOG" 2>&1 || eq_status=failed
read -r ours ours_mib <<EOF2
$($PY -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in rs if "summary" in r][-1]["summary"]
print("%.0f %.0f" % (s["tokens_per_s"], s["memory"]["peak_bytes"] / 2**20))' "$m" 2>/dev/null || echo "0 0")
EOF2
peer=$(timeout "$(limit 60)" $PY "$B/tools/bench_bert_pytorch.py" --model bert-base --device cuda --batch-size 32 \
       --seq-len 128 --steps 12 2>>"$LOG")
theirs=$(printf '%s\n' "$peer" | awk '$1 == "tokens_per_s" {printf "%.0f", $2}')
theirs_mib=$(printf '%s\n' "$peer" | awk '$1 == "peak_bytes" {printf "%.0f", $2 / 1048576}')
ratio=$($PY -c "import sys; t=float(sys.argv[2] or 0); print('%.2f' % (float(sys.argv[1]) / t) if t > 0 else 'n/a')" \
        "$ours" "${theirs:-0}")
say "selftest: bert-base fp32 batch 32 seq 128: ddp_train $ours tokens/s ($ours_mib MiB), PyTorch ${theirs:-?} tokens/s (${theirs_mib:-?} MiB), ratio $ratio"
eq_md="$eq_md
- bert-base fp32, batch 32, seq 128: ddp_train $ours tokens/s ($ours_mib MiB peak), PyTorch eager ${theirs:-n/a} (${theirs_mib:-n/a} MiB), ratio $ratio (a figure, no bar yet)"
tier bert "$eq_status" $(( $(now) - start )) "{\"status\": \"$eq_status\", \"bert_base_tokens_per_s\": ${ours:-0}, \"pytorch_tokens_per_s\": ${theirs:-0}}" "$eq_md"

# --------------------------------------------------------- mixed precision
start=$(now)
mp_status=passed
mp="$OUT/mixed_fp16.jsonl"
# Rank 0's gradient made non-finite at step 3: that step is skipped, the
# scale halves from 2^16, training goes on.
DDP_TEST_INJECT_NONFINITE_GRAD=3:0 timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda \
  --precision fp16 --batch-size 32 --image-size 64 --num-classes 10 --steps 5 --metrics-file "$mp" >>"$LOG" 2>&1 ||
  mp_status=failed
mp_check=$($PY -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rs if "step" in r]
ok = [r["skipped"] for r in steps] == [False, False, True, False, False] and \
     [r["loss_scale"] for r in steps] == [65536, 65536, 65536, 32768, 32768]
print("ok" if ok else "bad: %s" % [(r["skipped"], r["loss_scale"]) for r in steps])' "$mp" 2>&1)
[ "$mp_check" = ok ] || mp_status=failed
timeout "$(limit 40)" "$B/bin/ddp_train" --model resnet18 --device cuda --precision bf16 --batch-size 32 \
  --image-size 64 --num-classes 10 --steps 5 --metrics-file "$OUT/mixed_bf16.jsonl" >>"$LOG" 2>&1 || mp_status=failed
tier mixed_precision "$mp_status" $(( $(now) - start )) "{\"fp16_skip\": \"$(json_string "$mp_check")\"}" \
  "fp16 with dynamic loss scaling, a non-finite gradient injected at step 3: $mp_check; bf16 run: see selftest.log"

# ------------------------------------------------------------------ data
# Real data on the GPU: a generated JPEG folder (one corrupt file) trained
# from through the pinned-buffer stager, the corrupt file counted; and,
# where the machine's Python has transformers, tools/tokenize_text against
# BertTokenizer on the same vocabulary.
start=$(now)
data_status=passed
"$B/bin/make_image_folder" --out "$OUT/folder" --classes 4 --per-class 40 --sizes 96x72,72x96 --corrupt 1 >>"$LOG" 2>&1
timeout "$(limit 60)" "$B/bin/ddp_train" --model resnet18 --device cuda --data "imagefolder:$OUT/folder" \
  --num-classes 4 --image-size 64 --batch-size 32 --epochs 2 --metrics-file "$OUT/folder.jsonl" >>"$LOG" 2>&1 ||
  data_status=failed
folder=$(grep '"summary"' "$OUT/folder.jsonl" 2>/dev/null | tail -n 1)
case "$folder" in *'"replaced_samples":2'*) ;; *) data_status=failed ;; esac
tok=$(timeout "$(limit 60)" $PY "$B/tools/check_tokenizer.py" --tokenize-text "$B/bin/tokenize_text" \
      --out "$OUT/tokenizer" 2>&1)
tok_rc=$?
printf '%s\n' "$tok" >> "$LOG"
case "$tok_rc" in 0|3) ;; *) data_status=failed ;; esac
tier data "$data_status" $(( $(now) - start )) \
  "{\"imagefolder_summary\": ${folder:-null}, \"tokenizer_rc\": $tok_rc, \"tokenizer\": \"$(json_string "$tok")\"}" \
  "imagefolder ResNet-18 on the GPU, 2 epochs over 161 files (one corrupt, replaced once an epoch): \`${folder:-no summary}\`

tokenize_text against transformers' BertTokenizer (exit $tok_rc; 3: no transformers):
\`\`\`
$tok
\`\`\`"

# ------------------------------------------------------------ BERT interop
# Where the machine's Python has transformers: a bert-tiny file saved by
# ddp_train loads into BertForPreTraining (strict) with the same loss, one
# saved from transformers loads into ddp_train with the same loss, and the
# checked-in state dict manifest matches the library's.
start=$(now)
interop=$(timeout "$(limit 120)" $PY "$B/tools/check_bert_interop.py" --ddp-train "$B/bin/ddp_train" \
          --out "$OUT/bert_interop" --manifest "$B/tools/bert_state_dict_manifest.json" 2>&1)
interop_rc=$?
printf '%s\n' "$interop" >> "$LOG"
case "$interop_rc" in 0) interop_status=passed ;; 3) interop_status=skipped ;; *) interop_status=failed ;; esac
tier bert_interop "$interop_status" $(( $(now) - start )) "{\"output\": \"$(json_string "$interop")\"}" \
  "\`\`\`
$interop
\`\`\`"

# -------------------------------------------------------------- benchmarks
start=$(now)
bench_md="| precision | batch | ddp_train images/s | PyTorch eager images/s | ratio | ddp_train peak MiB | PyTorch peak MiB |
|---|---|---|---|---|---|---|"
bench_json=""
bench_status=passed
for config in fp32:64 tf32:64 fp16:128 bf16:128 fp16+graphs:128 bf16+graphs:128; do
  variant=${config%:*}; batch=${config#*:}
  precision=${variant%+graphs}
  graphs=""
  [ "$variant" != "$precision" ] && graphs="--cuda-graphs"
  m="$OUT/bench_$variant.jsonl"
  # shellcheck disable=SC2086
  timeout "$(limit 60)" "$B/bin/ddp_train" --model resnet50 --device cuda --precision "$precision" $graphs \
    --batch-size "$batch" --image-size 224 --steps 20 --metrics-file "$m" >>"$LOG" 2>&1 || bench_status=failed
  read -r ours ours_mib <<EOF2
$($PY -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in rs if "summary" in r][-1]["summary"]
print("%.1f %.0f" % (s["samples_per_s"], s["memory"]["peak_bytes"] / 2**20))' "$m" 2>/dev/null || echo "0 0")
EOF2
  # The peer: eager AMP with channels-last for 16-bit, as its users run it.
  peer_flags=""
  case "$precision" in fp16|bf16) peer_flags="--channels-last" ;; esac
  # With graphs, the same peer as the eager row above (measured once).
  if [ -z "$graphs" ]; then
    # shellcheck disable=SC2086
    peer=$(timeout "$(limit 60)" $PY "$B/tools/bench_resnet_pytorch.py" --device cuda --precision "$precision" \
           --batch-size "$batch" --steps 20 $peer_flags 2>>"$LOG")
    theirs=$(printf '%s\n' "$peer" | tail -n 1)
    theirs_mib=$(printf '%s\n' "$peer" | awk '$1 == "peak_bytes" {printf "%.0f", $2 / 1048576}')
    case "$theirs" in ''|*[!0-9.]*) theirs=0 ;; esac
    eval "peer_$precision=\$theirs peer_mib_$precision=\${theirs_mib:-n/a}"
  else
    eval "theirs=\$peer_$precision theirs_mib=\$peer_mib_$precision"
  fi
  ratio=$($PY -c "import sys; t=float(sys.argv[2]); print('%.2f' % (float(sys.argv[1]) / t) if t > 0 else 'n/a')" \
          "$ours" "$theirs")
  say "selftest: ResNet-50 $variant batch $batch: ddp_train $ours images/s ($ours_mib MiB), PyTorch $theirs (${theirs_mib:-?} MiB), ratio $ratio"
  bench_md="$bench_md
| $variant | $batch | $ours | $theirs | $ratio | $ours_mib | ${theirs_mib:-n/a} |"
  bench_json="${bench_json:+$bench_json, }\"$variant\": {\"batch\": $batch, \"ddp_train\": $ours, \"pytorch\": $theirs, \"ratio\": \"$ratio\", \"ddp_train_peak_mib\": ${ours_mib:-0}, \"pytorch_peak_mib\": ${theirs_mib:-0}}"
  case "$ratio" in n/a) ;; *) $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.9 else 1)" "$ratio" ||
    bench_status=failed ;; esac
done
tier benchmarks "$bench_status" $(( $(now) - start )) "{$bench_json}" "ResNet-50, 224x224, synthetic, 1 GPU; fp32/tf32 at batch 64 against PyTorch eager, fp16/bf16 at batch 128 against PyTorch eager AMP with channels-last, without and with --cuda-graphs (bar: ratio >= 0.9; goal 1.1)

$bench_md"

if [ "$FAILED" -eq 0 ]; then say "selftest: every check passed"; exit 0; fi
say "selftest: some checks failed; see $OUT/report.md"
exit 1
