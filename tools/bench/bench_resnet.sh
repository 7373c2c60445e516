#!/usr/bin/env bash
# ResNet training throughput and memory on CPU, one rank: ddp_train against
# PyTorch (torchvision model, same batch, threads and optimizer) in the same
# command, interleaved so both see the same machine load.
#   bash tools/bench/bench_resnet.sh [--model resnet50] [--batch-size 8] [--image-size 224]
#                              [--threads 2] [--steps 12] [--rounds 2] [--precision fp32|bf16]
# With --precision bf16 each round runs four: ddp_train in bf16 and in fp32,
# and PyTorch under torch.autocast("cpu", torch.bfloat16) and in fp32; it
# reports ddp_train bf16 against PyTorch bf16, and each one's bf16/fp32
# speed-up. PyTorch runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset,
# so the peer is at its best. Throughput excludes 2 warm-up steps on both
# sides.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
model=resnet50 batch=8 image=224 threads=2 steps=12 rounds=2 precision=fp32
bench_options bench_resnet.sh --model=model --batch-size=batch --image-size=image --threads=threads --steps=steps \
  --rounds=rounds --precision=precision -- "$@"
case "$precision" in
  fp32) precisions=(fp32) ;;
  bf16) precisions=(bf16 fp32) ;;
  *) echo "bench_resnet.sh: --precision must be fp32 or bf16, not '$precision'" >&2; exit 2 ;;
esac
bench_build --with-pytorch //launch:ddp_train
bench_tmp
metrics="$tmp/metrics.jsonl" results="$tmp/results"
for round in $(seq "$rounds"); do
  for p in "${precisions[@]}"; do
    bazel-bin/launch/ddp_train --model "$model" --batch-size "$batch" --image-size "$image" --threads "$threads" \
      --steps "$steps" --lr 0.01 --zero-init-residual --precision "$p" --metrics-file "$metrics" >/dev/null
    ours=$(bench_summary "$metrics" samples_per_s memory.peak_resident_bytes)
    theirs=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/bench/pytorch/bench_resnet_pytorch.py \
      --model "$model" --batch-size "$batch" --image-size "$image" --threads "$threads" --steps "$steps" \
      --precision "$p" | awk '{v[$1]=$2} END {print v["images_per_s"], v["peak_resident_bytes"]}')
    echo "ddp_train $p $ours" >> "$results"
    echo "pytorch $p $theirs" >> "$results"
    echo "round $round $p: ddp_train ${ours% *} images/s, PyTorch ${theirs% *} images/s"
  done
done
python3 - "$model" "$batch" "$image" "$threads" "$precision" "$results" <<'PY'
import collections, statistics, sys
model, batch, image, threads, precision, path = sys.argv[1:7]
runs = collections.defaultdict(list)
for line in open(path):
    who, p, speed, rss = line.split()
    runs[who, p].append((float(speed), float(rss)))
def speed(who, p): return statistics.median(r[0] for r in runs[who, p])
def memory(who, p): return max(r[1] for r in runs[who, p]) / 2**20
n = len(runs["ddp_train", precision])
o, t = speed("ddp_train", precision), speed("pytorch", precision)
print(f"{model} batch {batch} {image}px {threads} threads, {precision}: ddp_train {o:.2f} images/s, "
      f"PyTorch {t:.2f} images/s, ratio {o / t:.2f} (median of {n})")
om, tm = memory("ddp_train", precision), memory("pytorch", precision)
print(f"peak resident memory: ddp_train {om:.0f} MiB, PyTorch {tm:.0f} MiB, ratio {om / tm:.2f}")
if precision == "bf16":
    for who in ("ddp_train", "pytorch"):
        print(f"{who}: bf16 {speed(who, 'bf16'):.2f} images/s, fp32 {speed(who, 'fp32'):.2f} images/s, "
              f"bf16/fp32 speed-up {speed(who, 'bf16') / speed(who, 'fp32'):.2f}")
PY
