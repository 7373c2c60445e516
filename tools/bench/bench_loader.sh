#!/usr/bin/env bash
# The input pipeline's speed, per core, against PyTorch's: decoded and
# augmented 224x224 training crops per second from a generated folder of
# 500x375 JPEGs, by tools/bench/bench_loader (crop-aware decodes) and by
# torchvision's ImageFolder + DataLoader at the same worker count,
# interleaved ROUNDS times; prints each median and their ratio (bar 1.5).
# Then a ResNet-18 training run on the same folder: the share of step time
# spent waiting for input at the stated loader threads (bar: under 5%).
# The PyTorch peer runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.
#   bash tools/bench/bench_loader.sh [--rounds 3] [--threads 1] [--images 400]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
rounds=3 threads=1 images=400
bench_options bench_loader.sh --rounds=rounds --threads=threads --images=images -- "$@"
bench_build --with-pytorch //tools/bench:bench_loader //tools:make_image_folder //launch:ddp_train
bench_tmp
bazel-bin/tools/make_image_folder --out "$tmp/data" --classes 4 --per-class $((images / 4)) --sizes 500x375 \
  --png-share 0 --gray-share 0 --cmyk-share 0 --quality 90 >/dev/null
for round in $(seq 1 "$rounds"); do
  bazel-bin/tools/bench/bench_loader --data "$tmp/data" --threads "$threads" --batches 20 > "$tmp/ours_$round.json"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/bench/pytorch/bench_loader_pytorch.py "$tmp/data" \
    --workers "$threads" --batches 20 > "$tmp/torch_$round.json"
  echo "round $round: ddp_train $(cat "$tmp/ours_$round.json"), torchvision $(cat "$tmp/torch_$round.json")"
done
bazel-bin/launch/ddp_train --model resnet18 --data "imagefolder:$tmp/data" --num-classes 4 --image-size 224 \
  --batch-size 16 --steps 12 --loader-threads "$threads" --metrics-file "$tmp/train.jsonl" >/dev/null
python3 - "$tmp" "$rounds" "$threads" <<'PY'
import json, statistics, sys
tmp, rounds, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ours = statistics.median(json.load(open(f"{tmp}/ours_{r}.json"))["images_per_s"] for r in range(1, rounds + 1))
theirs = statistics.median(json.load(open(f"{tmp}/torch_{r}.json"))["images_per_s"] for r in range(1, rounds + 1))
print(f"224x224 training crops from 500x375 JPEGs, {threads} loader thread(s)/worker(s): ddp_train "
      f"{ours / threads:.1f} images/s per core, torchvision ImageFolder + DataLoader {theirs / threads:.1f}: "
      f"ratio {ours / theirs:.2f} (median of {rounds} interleaved rounds; bar 1.5)")
summary = json.loads(open(f"{tmp}/train.jsonl").read().splitlines()[-1])["summary"]
print(f"ResNet-18, batch 16, 224x224, on that folder with {summary['loader_threads']} loader thread(s): input wait "
      f"{100 * summary['input_wait_share']:.2f}% of step time (bar: under 5%), {summary['samples_per_s']:.1f} images/s")
PY
