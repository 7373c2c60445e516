#!/usr/bin/env bash
# --bucket-mb auto against the default 25 MiB on a shaped link, in the same
# command: 2 (or --ranks) network-namespace hosts whose links tc tbf shapes
# to --rate each way (tools/scaling/netns_hosts.sh; root), the two settings
# interleaved over --rounds rounds; prints each run, the medians and their
# ratio. Exit 1 when auto is slower than the default by more than --slack.
#
#   bash tools/bench/bench_bucket_auto.sh [--rate 1gbit] [--ranks 2] [--rounds 3] [--model resnet18 --image-size 64]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/../../bazel-bin/launch/ddp_train"
source "$here/bench_lib.sh"
rate=1gbit ranks=2 rounds=3 model=resnet18 image_size=64 batch_size=16 steps=12 slack=0.03
bench_options bench_bucket_auto --rate=rate --ranks=ranks --rounds=rounds --model=model --image-size=image_size \
  --batch-size=batch_size --steps=steps --slack=slack -- "$@"
[ -x "$bin" ] || { echo "bench_bucket_auto: build first: bazel build //launch:ddp_train" >&2; exit 2; }
source "$here/../scaling/netns_hosts.sh"
why="$(netns_available)" || { echo "bench_bucket_auto: cannot shape links here: $why" >&2; exit 3; }
trap netns_down EXIT
netns_up "$ranks" "$rate" || exit 2
out="$(mktemp -d)"
for r in $(seq 1 "$rounds"); do
  for setting in 25 auto; do
    $NETNS_MPIRUN -np "$ranks" "$bin" --model "$model" --image-size "$image_size" --batch-size "$batch_size" \
      --steps "$steps" --threads 1 --log-every 0 --bucket-mb "$setting" --metrics-file "$out/${setting}_$r.jsonl" \
      > "$out/${setting}_$r.log" 2>&1 || { cat "$out/${setting}_$r.log"; exit 1; }
  done
done
grep -h "bucket-mb auto:" "$out"/auto_*.log | sed -n 1p
python3 - "$out" "$rounds" "$slack" "$model" "$image_size" "$ranks" "$rate" <<'PY'
import json, statistics, sys
out, rounds, slack, model, size, ranks, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:]
def run(setting, r):
    s = json.loads(open(f"{out}/{setting}_{r}.jsonl").read().splitlines()[-1])["summary"]
    return s["samples_per_s"], s["bucket_mb"]
print(f"{model} {size}x{size}, {ranks} ranks, links shaped to {rate}: images/s per run")
rows = {s: [run(s, r) for r in range(1, rounds + 1)] for s in ("25", "auto")}
for s, v in rows.items():
    print(f"  --bucket-mb {s:4}: " + "  ".join(f"{x:.2f} ({mb:g} MiB)" for x, mb in v))
default, auto = (statistics.median(x for x, _ in rows[s]) for s in ("25", "auto"))
print(f"median: 25 MiB {default:.2f}, auto {auto:.2f}: auto / default = {auto / default:.3f}")
sys.exit(0 if auto >= default * (1 - slack) else 1)
PY
