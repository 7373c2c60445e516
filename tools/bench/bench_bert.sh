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
#                            [--threads 2] [--steps 8] [--rounds 2]
# The peer's GEMMs are OpenBLAS's: PyTorch runs with OPENBLAS_L2_SIZE unset
# and, on AVX-512 CPUs, OPENBLAS_CORETYPE=SkylakeX. Unset, OpenBLAS 0.3.21's
# detection reports "Prescott" inside these sandboxes (37 GFLOP/s sgemm on
# 2 threads); Haswell gives 130, SkylakeX 205-250: the peer at its best.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
model=bert-base batch=8 seq=128 threads=2 steps=8 rounds=2
bench_options bench_bert.sh --model=model --batch-size=batch --seq-len=seq --threads=threads --steps=steps \
  --rounds=rounds -- "$@"
bench_build --with-pytorch //launch:ddp_train
coretype=""
grep -q avx512f /proc/cpuinfo && coretype="OPENBLAS_CORETYPE=SkylakeX"
bench_tmp
metrics="$tmp/metrics.jsonl" results="$tmp/results"
# The peer's tokens/s and peak resident bytes; its extra flags after.
peer() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $coretype /usr/bin/python3 tools/bench/pytorch/bench_bert_pytorch.py \
    --model "$model" --batch-size "$batch" --seq-len "$seq" --threads "$threads" --steps "$steps" "$@" |
    awk '{v[$1]=$2} END {print v["tokens_per_s"], v["peak_resident_bytes"]}'
}
for round in $(seq "$rounds"); do
  bazel-bin/launch/ddp_train --model "$model" --batch-size "$batch" --seq-len "$seq" --threads "$threads" \
    --steps "$steps" --optimizer adamw --lr 1e-4 --weight-decay 0.01 --nodecay-bn-bias --metrics-file "$metrics" \
    >/dev/null
  ours=$(bench_summary "$metrics" tokens_per_s memory.peak_resident_bytes)
  theirs=$(peer)
  masked=$(peer --masked-only)
  echo "ddp_train $ours" >> "$results"
  echo "pytorch $theirs" >> "$results"
  echo "pytorch_masked $masked" >> "$results"
  echo "round $round: ddp_train ${ours% *} tokens/s, PyTorch ${theirs% *} tokens/s, masked-only ${masked% *}"
done
python3 - "$model" "$batch" "$seq" "$threads" "$results" <<'PY'
import collections, statistics, sys
model, batch, seq, threads, path = sys.argv[1:6]
runs = collections.defaultdict(list)
for line in open(path):
    who, speed, rss = line.split()
    runs[who].append((float(speed), float(rss)))
o = statistics.median(r[0] for r in runs["ddp_train"])
t = statistics.median(r[0] for r in runs["pytorch"])
om = max(r[1] for r in runs["ddp_train"]) / 2**20
tm = max(r[1] for r in runs["pytorch"]) / 2**20
print(f"{model} batch {batch} seq {seq} {threads} threads: ddp_train {o:.0f} tokens/s, PyTorch {t:.0f} tokens/s, "
      f"ratio {o / t:.2f} (median of {len(runs['ddp_train'])})")
m = statistics.median(r[0] for r in runs["pytorch_masked"])
print(f"against the peer projecting only the masked positions: PyTorch {m:.0f} tokens/s, ratio {o / m:.2f}")
print(f"peak resident memory: ddp_train {om:.0f} MiB, PyTorch {tm:.0f} MiB, ratio {om / tm:.2f}")
PY
