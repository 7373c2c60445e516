#!/usr/bin/env bash
# --timeline on a real 2-rank run (DDP, and ZeRO 2 with accumulation):
# the file is Chrome trace-event JSON holding both ranks' tracks (named),
# events only of the steps --timeline-steps asks for, each layer's forward
# and backward (nested in the model's), the gradient wait, the optimizer
# step and the input; each step's bucket collectives match the metrics'
# per-bucket launch and finish times; the clock offsets measured at start
# are there. An unwritable --timeline path fails before training.
set -u
bin=launch/ddp_train
source tests/lib.sh

check() {  # check NAME ARGS...
  local name="$1"; shift
  timeout 180 mpirun -np 2 --oversubscribe --bind-to none "$bin" --model resnet18 --image-size 32 --batch-size 4 \
    --steps 5 --threads 1 --bucket-mb 4 --first-bucket-mb 0.5 --timeline "$tmp/$name.json" --timeline-steps 2:4 \
    --metrics-file "$tmp/$name.jsonl" "$@" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name run"; return; }
  /usr/bin/python3 - "$tmp/$name.json" "$tmp/$name.jsonl" "$name" <<'PY' || fail "$name timeline"
import json, sys
trace = json.load(open(sys.argv[1]))
metrics = [json.loads(l) for l in open(sys.argv[2])]
name = sys.argv[3]
events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
assert {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "process_name"} == {(0, "rank 0"), (1, "rank 1")}
assert {e["args"]["name"] for e in meta if e["name"] == "thread_name"} == {"compute", "communication", "input"}
assert {e["args"]["step"] for e in events} == {2, 3, 4}, sorted({e["args"]["step"] for e in events})
assert len(trace["otherData"]["clock_offsets_s"]) == 2 and trace["otherData"]["clock_offsets_s"][0] == 0.0
for e in events:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
for pid in (0, 1):
    mine = [e for e in events if e["pid"] == pid]
    names = {(e["cat"], e["name"]) for e in mine}
    for want in [("forward", "model"), ("backward", "model"), ("forward", "layer1.0.conv1"), ("backward", "layer4.1.conv2"),
                 ("wait", "wait for gradients"), ("optimizer", "optimizer step"), ("input", "input")]:
        assert want in names, (pid, want)
    # A layer's forward lies inside the model's forward of its step.
    for step in (2, 3, 4):
        model = [e for e in mine if e["name"] == "model" and e["cat"] == "forward" and e["args"]["step"] == step]
        conv = [e for e in mine if e["name"] == "layer1.0.conv1" and e["cat"] == "forward" and e["args"]["step"] == step]
        assert model and conv
        assert model[0]["ts"] <= conv[0]["ts"] and conv[0]["ts"] + conv[0]["dur"] <= model[0]["ts"] + model[0]["dur"] + 1
# Rank 0's bucket events against the metrics' per-bucket timings.
kind = "reduce-scatter" if "zero" in name else "all-reduce"
by_step = {r["step"]: r for r in metrics if "step" in r}
for step in (2, 3, 4):
    buckets = by_step[step]["buckets"]
    ours = sorted((e for e in events if e["pid"] == 0 and e["cat"] == "collective" and e["args"]["step"] == step),
                  key=lambda e: int(e["name"].split()[-1]))
    assert len(ours) == len(buckets) and all(e["name"].startswith(kind + " bucket ") for e in ours), (step, len(ours))
    zero = ours[0]["ts"] - buckets[0]["launched_s"] * 1e6  # the step's backward start
    for e, b in zip(ours, buckets):
        assert abs(e["ts"] - zero - b["launched_s"] * 1e6) < 1.0, (step, e, b)
        assert abs(e["dur"] - (b["finished_s"] - b["launched_s"]) * 1e6) < 1.0, (step, e, b)
print(f"{name}: {len(events)} events over steps 2-4 on 2 ranks, buckets equal to the metrics'")
PY
}
check ddp
check zero2 --zero-stage 2 --accumulation-steps 2

out=$("$bin" --model resnet18 --image-size 32 --batch-size 2 --steps 1 --threads 1 --timeline /nonexistent/t.json 2>&1)
rc=$?
{ [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] &&
  grep -q "^ddp_train: error: --timeline /nonexistent/t.json: directory /nonexistent does not exist" <<< "$out"; } ||
  { echo "$out"; fail "unwritable --timeline: exit $rc"; }
out=$("$bin" --model resnet18 --timeline-steps 5:2 2>&1)
grep -q "^ddp_train: error: --timeline-steps '5:2' is not A:B with 1 <= A <= B" <<< "$out" ||
  { echo "$out"; fail "bad --timeline-steps"; }

finish "timeline test"
