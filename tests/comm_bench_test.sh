#!/usr/bin/env bash
# tools/comm_bench under mpirun at 2 and 3 ranks: every operation at every
# size from 8 B to 4 MiB checked against exact values (#wrong 0; 3 ranks
# make sizes that do not split evenly), the columns nccl-tests prints, the
# raw MPI columns beside the all-reduce; --min-busbw as a gate; --sequence
# (a step's buckets queued at once, or one at a time) checked the same way;
# an unknown operation or a size below one element is one line, exit 2.
set -u
bin=tools/comm_bench
source tests/lib.sh

for np in 2 3; do
  timeout 240 mpirun -np "$np" --oversubscribe --bind-to none "$bin" --max-bytes 4M --seconds-per-size 0.01 \
    > "$tmp/np$np.txt" 2>&1 || { cat "$tmp/np$np.txt"; fail "$np ranks"; continue; }
  /usr/bin/python3 - "$tmp/np$np.txt" "$np" <<'PY' || { cat "$tmp/np$np.txt"; fail "$np ranks: the table"; }
import sys
lines = open(sys.argv[1]).read().splitlines()
n = int(sys.argv[2])
ops, rows = None, {}
for line in lines:
    if line.startswith("# ") and line[2:].strip() in ("allreduce", "reducescatter", "allgather", "broadcast"):
        ops = line[2:].strip(); rows[ops] = []
    elif ops and line.strip() and not line.startswith("#"):
        rows[ops].append(line.split())
assert set(rows) == {"allreduce", "reducescatter", "allgather", "broadcast"}, rows.keys()
for op, table in rows.items():
    sizes = [int(r[0]) for r in table]
    assert sizes[-1] >= (4 << 20) - 4 * n and len(sizes) >= 15, (op, sizes)
    for r in table:
        size, count, time_us, algbw, busbw, wrong = int(r[0]), int(r[1]), float(r[2]), float(r[3]), float(r[4]), int(r[5])
        assert wrong == 0, (op, r)
        assert count * 4 == size and time_us > 0
        factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)
        assert abs(algbw - size / (time_us * 1e-6) / 1e9) <= 0.002 + 0.01 * algbw, (op, r)
        assert abs(busbw - algbw * factor) <= 0.002 + 0.01 * busbw, (op, r)
        if op == "allreduce":
            # The raw columns print 3 decimals of GB/s: tiny sizes on a
            # loaded machine round to 0.000; from 64 KiB they cannot.
            assert len(r) == 9 and float(r[6]) >= 0 and float(r[7]) >= 0, r
            if size >= 65536:
                assert float(r[6]) > 0 and float(r[7]) > 0, r
print(f"{n} ranks: {sum(len(t) for t in rows.values())} rows, #wrong 0 everywhere")
PY
  grep -q "^# #wrong in all: 0$" "$tmp/np$np.txt" || fail "$np ranks: no '#wrong in all: 0'"
done

# The gate: an impossible bandwidth fails.
timeout 120 mpirun -np 2 --oversubscribe --bind-to none "$bin" --ops broadcast --max-bytes 1K --seconds-per-size 0.01 \
  --min-busbw 1e9 > "$tmp/gate.txt" 2>&1 && fail "--min-busbw 1e9 passed"
grep -q "busbw at the largest size below --min-busbw" "$tmp/gate.txt" || { cat "$tmp/gate.txt"; fail "no gate line"; }

# --sequence: a row a bucket and one for the step, sums exact.
for queued in --sequence_queued --nosequence_queued; do
  timeout 120 mpirun -np 3 --oversubscribe --bind-to none "$bin" --sequence 1M,64K,12,300K --gap-ms 2 \
    --sequence-steps 3 "$queued" > "$tmp/sequence.txt" 2>&1 || { cat "$tmp/sequence.txt"; fail "--sequence $queued"; continue; }
  /usr/bin/python3 - "$tmp/sequence.txt" <<'PY' || { cat "$tmp/sequence.txt"; fail "--sequence $queued: the table"; }
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
assert [r[0] for r in rows] == ["0", "1", "2", "3", "step"], rows
sizes = [int(r[1]) for r in rows]
assert sizes == [1 << 20, 64 << 10, 12, 300 << 10, (1 << 20) + (64 << 10) + 12 + (300 << 10)], sizes
busy = [float(r[2]) for r in rows]
assert all(t > 0 for t in busy) and busy[-1] >= max(busy[:-1]), busy
for r in rows:  # busbw: 2(N-1)/N x size / time
    assert abs(float(r[3]) - int(r[1]) / float(r[2]) / 1e3 * 4 / 3) <= 0.002 + 0.01 * float(r[3]), r
print("--sequence ok:", busy)
PY
  grep -q "^# #wrong in all: 0$" "$tmp/sequence.txt" || fail "--sequence $queued: no '#wrong in all: 0'"
done

refuse() {  # refuse PATTERN ARGS...
  local pattern="$1"; shift
  local out rc
  out=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$bin" "$@" 2>&1); rc=$?
  # (mpirun adds its own lines about a process's non-zero exit.)
  if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$out" | grep -c '^comm_bench:')" -ne 1 ] ||
     ! grep '^comm_bench:' <<< "$out" | grep -F -- "$pattern" > /dev/null; then
    fail "comm_bench $*: expected exit 2 and one line with '$pattern', got exit $rc:"; printf '%s\n' "$out"
  fi
}
refuse "--ops: unknown operation 'alltoall'" --ops allreduce,alltoall
refuse "--min-bytes 2 is below one f32 element (4 bytes)" --min-bytes 2
refuse "--max-bytes 'lots' is not a size" --max-bytes lots
refuse "--sequence: 'x' is not a size" --sequence 1M,x
refuse "--sequence: 2 is below one f32 element (4 bytes)" --sequence 1M,2

finish "comm_bench test"
