#!/usr/bin/env bash
# ResNet training throughput and memory on CPU, one rank: ddp_train against
# PyTorch (torchvision model, same batch, threads and optimizer) in the same
# command, interleaved so both see the same machine load.
#   bash tools/bench_resnet.sh [--model resnet50] [--batch-size 8] [--image-size 224]
#                              [--threads 2] [--steps 12] [--rounds 2]
# PyTorch runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, so the
# peer is at its best. Throughput excludes 2 warm-up steps on both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
model=resnet50 batch=8 image=224 threads=2 steps=12 rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --image-size) image="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "bench_resnet.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
bash tools/install_deps.sh --with-pytorch
bazel build //launch:ddp_train >/dev/null 2>&1 || bazel build //launch:ddp_train
metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
ours=() theirs=() our_rss=() their_rss=()
for round in $(seq "$rounds"); do
  bazel-bin/launch/ddp_train --model "$model" --batch-size "$batch" --image-size "$image" --threads "$threads" \
    --steps "$steps" --lr 0.01 --zero-init-residual --metrics-file "$metrics" >/dev/null
  ours+=("$(python3 -c "import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1])['summary']; print(s['samples_per_s'], s['memory']['peak_resident_bytes'])" "$metrics")")
  theirs+=("$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/bench_resnet_pytorch.py \
    --model "$model" --batch-size "$batch" --image-size "$image" --threads "$threads" --steps "$steps" |
    awk '{v[$1]=$2} END {print v["images_per_s"], v["peak_resident_bytes"]}')")
  echo "round $round: ddp_train ${ours[-1]% *} images/s, PyTorch ${theirs[-1]% *} images/s"
done
python3 - "$model" "$batch" "$image" "$threads" "${ours[@]}" -- "${theirs[@]}" <<'PY'
import statistics, sys
model, batch, image, threads = sys.argv[1:5]
rest = sys.argv[5:]
split = rest.index("--")
ours = [tuple(map(float, r.split())) for r in rest[:split]]
theirs = [tuple(map(float, r.split())) for r in rest[split + 1:]]
o = statistics.median(r[0] for r in ours)
t = statistics.median(r[0] for r in theirs)
om = max(r[1] for r in ours) / 2**20
tm = max(r[1] for r in theirs) / 2**20
print(f"{model} batch {batch} {image}px {threads} threads: ddp_train {o:.2f} images/s, PyTorch {t:.2f} images/s, "
      f"ratio {o / t:.2f} (median of {len(ours)})")
print(f"peak resident memory: ddp_train {om:.0f} MiB, PyTorch {tm:.0f} MiB, ratio {om / tm:.2f}")
PY
