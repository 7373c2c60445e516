#!/usr/bin/env bash
# --tensorboard-dir on a real run (2 ranks, evaluation, dynamic loss
# scaling): the event file rank 0 writes is read back by an independent
# reader (Python, Debian's python3-crc32c, the protobuf wire format decoded
# by hand): every record's masked CRC-32C holds, the first Event is
# "brain.Event:2", each step's Event carries the metrics file's loss, lr,
# samples/s, exposed communication, input wait and loss scale for that
# step, evaluations carry eval/accuracy, and the last holds the memory. An
# unwritable --tensorboard-dir fails before training, in one line.
set -u
bin=launch/ddp_train
source tests/lib.sh

tools/make_image_dataset --out "$tmp/data.safetensors" --samples 32 --image-size 32 --num-classes 10 >/dev/null || exit 1
timeout 180 mpirun -np 2 --oversubscribe --bind-to none "$bin" --model resnet18 --image-size 32 --num-classes 10 \
  --batch-size 4 --steps 5 --threads 1 --data "tensors:$tmp/data.safetensors" --eval-data "tensors:$tmp/data.safetensors" \
  --eval-every 2 --loss-scale dynamic --tensorboard-dir "$tmp/tb" --metrics-file "$tmp/m.jsonl" > "$tmp/run.log" 2>&1 ||
  { cat "$tmp/run.log"; fail "training run"; }
[ "$(ls "$tmp/tb" | wc -l)" = 1 ] || fail "expected one event file (rank 0's), got: $(ls "$tmp/tb")"
/usr/bin/python3 - "$tmp/tb" "$tmp/m.jsonl" <<'PY' || fail "the event file does not hold the run's scalars"
import glob, json, struct, sys
import crc32c

def masked(data):
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def varint(b, i):
    shift = value = 0
    while True:
        byte = b[i]; i += 1
        value |= (byte & 0x7F) << shift; shift += 7
        if byte < 0x80:
            return value, i

def fields(b):  # (number, wire type, value) of a protobuf message
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(b, i)
        elif wire == 1:
            value = b[i:i + 8]; i += 8
        elif wire == 2:
            n, i = varint(b, i); value = b[i:i + n]; i += n
        elif wire == 5:
            value = b[i:i + 4]; i += 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value

[path] = glob.glob(sys.argv[1] + "/*")
assert "tfevents" in path.split("/")[-1], path
data = open(path, "rb").read()
events, at = [], 0
while at < len(data):
    (length,) = struct.unpack("<Q", data[at:at + 8])
    assert struct.unpack("<I", data[at + 8:at + 12])[0] == masked(data[at:at + 8]), f"length CRC at {at}"
    body = data[at + 12:at + 12 + length]
    assert struct.unpack("<I", data[at + 12 + length:at + 16 + length])[0] == masked(body), f"data CRC at {at}"
    event = {"step": 0, "scalars": {}}
    for number, wire, value in fields(body):
        if number == 1: event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2: event["step"] = value
        elif number == 3: event["file_version"] = value.decode()
        elif number == 5:
            for n, w, v in fields(value):
                assert n == 1
                tag, simple = None, None
                for vn, vw, vv in fields(v):
                    if vn == 1: tag = vv.decode()
                    if vn == 2: simple = struct.unpack("<f", vv)[0]
                event["scalars"][tag] = simple
    events.append(event)
    at += 16 + length
assert events[0].get("file_version") == "brain.Event:2", events[0]
records = [json.loads(l) for l in open(sys.argv[2])]
steps = [r for r in records if "step" in r]
by_step = {}
for e in events[1:]:  # the summary's event shares the last step
    by_step.setdefault(e["step"], {}).update(e["scalars"])
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
for r in steps:
    s = by_step[r["step"]]
    for key in ["loss", "lr", "samples_per_s", "exposed_comm_s", "input_wait_s", "loss_scale"]:
        assert s["train/" + key] == f32(r[key]), (r["step"], key, s.get("train/" + key), r[key])
    if "eval_accuracy" in r:
        assert s["eval/accuracy"] == f32(r["eval_accuracy"]), r["step"]
last = events[-1]["scalars"]
summary = records[-1]["summary"]
assert last["memory/peak_bytes"] == f32(summary["memory"]["peak_bytes"]), last
assert last["eval/accuracy"] == f32(summary["eval_accuracy"])
assert any("eval/accuracy" in by_step.get(s, {}) for s in (2, 4))
print(f"{len(events)} events, every CRC-32C good; scalars {sorted(events[1]['scalars'])} match the metrics")
PY

out=$("$bin" --model resnet18 --image-size 32 --batch-size 2 --steps 1 --threads 1 --tensorboard-dir /proc/no/dir 2>&1)
rc=$?
{ [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] && grep -q "^ddp_train: error: --tensorboard-dir" <<< "$out" &&
  ! grep -q "^step" <<< "$out"; } || { echo "$out"; fail "unwritable --tensorboard-dir: exit $rc"; }

finish "tensorboard test"
