#!/usr/bin/env bash
# BERT pretraining throughput and memory on CPU, one rank: ddp_train against
# plain eager PyTorch (tools/bench/pytorch/bench_bert_pytorch.py: nn.Linear, nn.LayerNorm,
# F.gelu, matmul-softmax-matmul attention, AdamW; same model, batch,
# sequence length, threads and dropout) in the same command, interleaved so
# both see the same machine load. Reports tokens/s (every position of the
# batch) and peak resident memory; throughput excludes 2 warm-up steps. The
# peer runs twice a round: as users write it (the MLM decoder over every
# position), and with the decoder over the masked positions only, as
# ddp_train (and NVIDIA's BERT) project.
#   bash tools/bench/bench_bert.sh [--model bert-base] [--batch-size 8] [--seq-len 128]
#                            [--threads 2] [--steps 8] [--rounds 2] [--precision fp32|bf16]
#                            [--baseline BINARY]
# --baseline runs another ddp_train build (fp32) in each round as well, so
# a change's before and after are measured against the same peer runs.
# With --precision bf16 each round runs four: ddp_train in bf16 and in fp32,
# and the masked-only peer under torch.autocast("cpu", torch.bfloat16) and
# in fp32; it reports ddp_train bf16 against the peer in bf16, and each
# one's bf16/fp32 speed-up and memory.
# The peer's GEMMs are OpenBLAS's: PyTorch runs with OPENBLAS_L2_SIZE unset
# and OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs, Haswell on AVX2 ones. Unset, OpenBLAS 0.3.21's
# detection reports "Prescott" inside these sandboxes (37 GFLOP/s sgemm on
# 2 threads); Haswell gives 130, SkylakeX 205-250: the peer at its best.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
model=bert-base batch=8 seq=128 threads=2 steps=8 rounds=2 precision=fp32 baseline=""
bench_options bench_bert.sh --model=model --batch-size=batch --seq-len=seq --threads=threads --steps=steps \
  --rounds=rounds --precision=precision --baseline=baseline -- "$@"
case "$precision" in
  fp32 | bf16) ;;
  *) echo "bench_bert.sh: --precision must be fp32 or bf16, not '$precision'" >&2; exit 2 ;;
esac
if [ -n "$baseline" ] && { [ "$precision" != fp32 ] || [ ! -x "$baseline" ]; }; then
  echo "bench_bert.sh: --baseline needs --precision fp32 and an executable ddp_train, not '$baseline'" >&2
  exit 2
fi
bench_build --with-pytorch //launch:ddp_train
coretype=""
if grep -q avx512f /proc/cpuinfo; then
  coretype="OPENBLAS_CORETYPE=SkylakeX"
elif grep -q avx2 /proc/cpuinfo; then
  coretype="OPENBLAS_CORETYPE=Haswell"
fi
bench_tmp
metrics="$tmp/metrics.jsonl" results="$tmp/results"
# The peer's tokens/s and peak resident bytes; its extra flags after.
peer() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $coretype /usr/bin/python3 tools/bench/pytorch/bench_bert_pytorch.py \
    --model "$model" --batch-size "$batch" --seq-len "$seq" --threads "$threads" --steps "$steps" "$@" |
    awk '{v[$1]=$2} END {print v["tokens_per_s"], v["peak_resident_bytes"]}'
}
# ddp_train's tokens/s and peak resident bytes, in precision $1 (the
# binary $binary).
binary=bazel-bin/launch/ddp_train
ours() {
  "$binary" --model "$model" --batch-size "$batch" --seq-len "$seq" --threads "$threads" \
    --steps "$steps" --optimizer adamw --lr 1e-4 --weight-decay 0.01 --nodecay-bn-bias --precision "$1" \
    --metrics-file "$metrics" >/dev/null
  bench_summary "$metrics" tokens_per_s memory.peak_resident_bytes
}
for round in $(seq "$rounds"); do
  if [ "$precision" = bf16 ]; then
    for p in bf16 fp32; do
      mine=$(ours "$p")
      theirs=$(peer --masked-only --precision "$p")
      echo "ddp_train_$p $mine" >> "$results"
      echo "pytorch_masked_$p $theirs" >> "$results"
      echo "round $round $p: ddp_train ${mine% *} tokens/s, masked-only PyTorch ${theirs% *} tokens/s"
    done
    continue
  fi
  mine=$(ours fp32)
  if [ -n "$baseline" ]; then
    before=$(binary="$baseline" ours fp32)
    echo "baseline $before" >> "$results"
    echo "round $round: baseline build ${before% *} tokens/s"
  fi
  theirs=$(peer)
  masked=$(peer --masked-only)
  echo "ddp_train $mine" >> "$results"
  echo "pytorch $theirs" >> "$results"
  echo "pytorch_masked $masked" >> "$results"
  echo "round $round: ddp_train ${mine% *} tokens/s, PyTorch ${theirs% *} tokens/s, masked-only ${masked% *}"
done
python3 - "$model" "$batch" "$seq" "$threads" "$precision" "$results" <<'PY'
import collections, statistics, sys
model, batch, seq, threads, precision, path = sys.argv[1:7]
runs = collections.defaultdict(list)
for line in open(path):
    who, speed, rss = line.split()
    runs[who].append((float(speed), float(rss)))
def speed(who): return statistics.median(r[0] for r in runs[who])
def memory(who): return max(r[1] for r in runs[who]) / 2**20
head = f"{model} batch {batch} seq {seq} {threads} threads"
if precision == "bf16":
    o, t = speed("ddp_train_bf16"), speed("pytorch_masked_bf16")
    print(f"{head}, bf16: ddp_train {o:.0f} tokens/s, masked-only PyTorch under autocast {t:.0f} tokens/s, "
          f"ratio {o / t:.2f} (median of {len(runs['ddp_train_bf16'])})")
    for who, name in (("ddp_train", "ddp_train"), ("pytorch_masked", "PyTorch")):
        b, f = f"{who}_bf16", f"{who}_fp32"
        print(f"{name}: bf16 {speed(b):.0f} tokens/s, fp32 {speed(f):.0f}, speed-up {speed(b) / speed(f):.2f}; "
              f"peak resident memory bf16 {memory(b):.0f} MiB, fp32 {memory(f):.0f} MiB")
    sys.exit(0)
o, t = speed("ddp_train"), speed("pytorch")
print(f"{head}: ddp_train {o:.0f} tokens/s, PyTorch {t:.0f} tokens/s, ratio {o / t:.2f} (median of {len(runs['ddp_train'])})")
m = speed("pytorch_masked")
print(f"against the peer projecting only the masked positions: PyTorch {m:.0f} tokens/s, ratio {o / m:.2f}")
print(f"peak resident memory: ddp_train {memory('ddp_train'):.0f} MiB, PyTorch {memory('pytorch'):.0f} MiB, "
      f"ratio {memory('ddp_train') / memory('pytorch'):.2f}")
if runs["baseline"]:
    b = speed("baseline")
    print(f"baseline build: {b:.0f} tokens/s, ratio to PyTorch {b / t:.2f}; this build over it {o / b:.2f}; "
          f"peak resident memory {memory('baseline'):.0f} MiB")
PY
