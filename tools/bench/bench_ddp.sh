#!/usr/bin/env bash
# DDP overhead on a shared box, as DESIGN.md defines it: throughput of 2 DDP
# ranks / throughput of 2 independent single-rank runs at the same time.
# ResNet-50, 1 thread per rank, at 128px and 224px batch 8, interleaved
# (independent, DDP, independent, DDP, ...) for --rounds rounds; medians.
# In the same command: PyTorch DDP (gloo) measured the same way,
# ddp_train with --grad-compression bf16, and exposed communication per step
# with and without overlap.
#   bash tools/bench/bench_ddp.sh [--rounds 3] [--steps 8] [--sizes "128 224"]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/bench_lib.sh
rounds=3 steps=8 sizes="128 224" model=resnet50 batch=8
bench_options bench_ddp.sh --rounds=rounds --steps=steps --sizes=sizes -- "$@"
bench_build --with-pytorch //launch:ddp_train
bench_tmp
mpi+=(-np 2)
torch_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1)

for size in $sizes; do
  args=(--model "$model" --batch-size "$batch" --image-size "$size" --threads 1 --steps "$steps" --lr 0.001
        --zero-init-residual)
  for round in $(seq "$rounds"); do
    # ddp_train: two independent single-rank runs at once, then 2 DDP ranks.
    bazel-bin/launch/ddp_train "${args[@]}" --metrics-file "$tmp/a.jsonl" >/dev/null &
    bazel-bin/launch/ddp_train "${args[@]}" --seed 2 --metrics-file "$tmp/b.jsonl" >/dev/null
    wait
    echo "$(bench_summary "$tmp/a.jsonl" samples_per_s) $(bench_summary "$tmp/b.jsonl" samples_per_s)" |
      awk '{print $1 + $2}' >> "$tmp/ours_indep_$size"
    "${mpi[@]}" bazel-bin/launch/ddp_train "${args[@]}" --metrics-file "$tmp/d.jsonl" >/dev/null
    bench_summary "$tmp/d.jsonl" samples_per_s >> "$tmp/ours_ddp_$size"
    bench_summary "$tmp/d.jsonl" exposed_comm_s >> "$tmp/ours_exposed_$size"
    "${mpi[@]}" bazel-bin/launch/ddp_train "${args[@]}" --grad-compression bf16 --metrics-file "$tmp/c.jsonl" >/dev/null
    bench_summary "$tmp/c.jsonl" samples_per_s >> "$tmp/ours_bf16_$size"
    "${mpi[@]}" bazel-bin/launch/ddp_train "${args[@]}" --nooverlap --metrics-file "$tmp/n.jsonl" >/dev/null
    bench_summary "$tmp/n.jsonl" samples_per_s >> "$tmp/ours_nooverlap_$size"
    bench_summary "$tmp/n.jsonl" exposed_comm_s >> "$tmp/ours_nooverlap_exposed_$size"
    # PyTorch: the same pair of measurements.
    targs=(--model "$model" --batch-size "$batch" --image-size "$size" --threads 1 --steps "$steps")
    "${torch_env[@]}" /usr/bin/python3 tools/bench/pytorch/bench_ddp_pytorch.py "${targs[@]}" > "$tmp/ta" &
    "${torch_env[@]}" /usr/bin/python3 tools/bench/pytorch/bench_ddp_pytorch.py "${targs[@]}" > "$tmp/tb"
    wait
    cat "$tmp/ta" "$tmp/tb" | awk '{s += $2} END {print s}' >> "$tmp/torch_indep_$size"
    port=$((29500 + RANDOM % 1000))
    "${torch_env[@]}" /usr/bin/python3 tools/bench/pytorch/bench_ddp_pytorch.py "${targs[@]}" --world 2 --rank 1 --port "$port" &
    "${torch_env[@]}" /usr/bin/python3 tools/bench/pytorch/bench_ddp_pytorch.py "${targs[@]}" --world 2 --rank 0 --port "$port" |
      awk '{print $2}' >> "$tmp/torch_ddp_$size"
    wait
    echo "$size px round $round: ddp_train $(tail -1 "$tmp/ours_ddp_$size") vs independent $(tail -1 "$tmp/ours_indep_$size");" \
         "PyTorch $(tail -1 "$tmp/torch_ddp_$size") vs independent $(tail -1 "$tmp/torch_indep_$size") images/s"
  done
done

python3 - "$tmp" "$sizes" <<'PY'
import statistics, sys
tmp, sizes = sys.argv[1], sys.argv[2].split()
def vals(name):
    return [float(v) for v in open(f"{tmp}/{name}").read().split()]
print(f"{'size':>6} {'ddp_train':>10} {'bf16':>6} {'nooverlap':>10} {'PyTorch':>8}   exposed comm/step (overlap, nooverlap)")
for s in sizes:
    def ratio(ddp, indep):
        return statistics.median(d / i for d, i in zip(vals(f"{ddp}_{s}"), vals(f"{indep}_{s}")))
    ours, bf16, noov = ratio("ours_ddp", "ours_indep"), ratio("ours_bf16", "ours_indep"), ratio("ours_nooverlap", "ours_indep")
    torch = ratio("torch_ddp", "torch_indep")
    e1, e2 = statistics.median(vals(f"ours_exposed_{s}")), statistics.median(vals(f"ours_nooverlap_exposed_{s}"))
    print(f"{s + 'px':>6} {ours:>10.3f} {bf16:>6.3f} {noov:>10.3f} {torch:>8.3f}   {e1:.3f} s, {e2:.3f} s")
print("DDP overhead figure: throughput(2 DDP ranks) / throughput(2 independent runs at once), median of "
      f"{len(vals('ours_ddp_' + sizes[0]))} interleaved rounds; 1.0 = free")
PY
