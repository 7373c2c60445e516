#!/usr/bin/env bash
# The scaling tools' inputs and bad input: ddp_train --profile-file writes a
# profile whose parameters are the model's (names, bytes, in backward order,
# ready times within backward); scaling_model predicts from it (one rank:
# the profiled step; two: no faster than that; A+B, one rank's runs
# averaged); --fit recovers a link from a
# comm_bench table; ddp_train --contention-probe at 2 ranks writes its
# figures; the model reproduces published 2 and 4 x RTX 4090 runs
# (tools/scaling/rtx4090_scaling) within 5%; malformed link files, unknown presets, foreign profiles
# and bad flags are one line each, exit 2.
set -u
train=launch/ddp_train
model=tools/scaling_model
source tests/lib.sh

expect_error() {  # expect_error "<fragment>" program args...
  local fragment="$1" out rc
  shift
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ]; then fail "$* exited 0"; return; fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then fail "$* printed more than one line:"; printf '%s\n' "$out"; return; fi
  case "$out" in
    *"$fragment"*) echo "ok: $out" ;;
    *) fail "$*: expected '$fragment' in: $out" ;;
  esac
}

"$train" --model resnet18 --image-size 32 --batch-size 4 --num-classes 10 --threads 1 --steps 5 --log-every 0 \
  --profile-file "$tmp/profile.json" --metrics-file "$tmp/metrics.jsonl" > "$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; fail "the profiled run"; }
/usr/bin/python3 - "$tmp/profile.json" "$tmp/metrics.jsonl" <<'PY' || fail "the profile's contents"
import json, sys
p = json.load(open(sys.argv[1]))
summary = json.loads(open(sys.argv[2]).read().splitlines()[-1])["summary"]
assert p["format"] == "ddp_train step profile 1" and p["model"] == "resnet18" and p["timed_steps"] == 3, p
params = p["params"]
# ResNet-18 with 10 classes: 62 tensors, backward order starts at the head.
assert len(params) == 62 and params[0]["name"] == "fc.bias" and params[-1]["name"] == "conv1.weight", params[:2]
assert sum(q["bytes"] for q in params) == summary["memory"]["param_bytes"], "bytes"
assert 0 < p["forward_s"] and 0 < p["backward_s"] <= p["step_s"] and p["compute_sd_s"] >= 0, p
for q in params:
    assert 0 <= q["ready_s"] <= p["last_backward_s"] + 1e-9, q
# The head's gradient is final first, the stem's last (medians, so allow ties).
assert params[0]["ready_s"] <= params[-1]["ready_s"] and params[-1]["ready_s"] > 0.5 * p["last_backward_s"], params
print("profile ok:", len(params), "parameters, step", round(p["step_s"] * 1e3, 1), "ms")
PY
out=$("$model" --profile "$tmp/profile.json" --link 25gbe --gpus 1,2 --csv 2>&1) || fail "scaling_model: $out"
/usr/bin/python3 - "$tmp/profile.json" <<PY || { echo "$out"; fail "scaling_model's prediction"; }
import json, sys
p = json.load(open(sys.argv[1]))
rows = [l.split(",") for l in """$out""".splitlines()[1:]]
assert [int(r[3]) for r in rows] == [1, 2], rows
one, two = float(rows[0][4]) / 1e3, float(rows[1][4]) / 1e3
assert abs(one - p["step_s"]) < 1e-6, (one, p["step_s"])
assert two >= one and float(rows[1][9]) <= 1.0, rows
print("prediction ok:", rows)
PY
# A+B in --profile: one rank's runs at different times, averaged before the
# ranks are combined; the same prediction as their mean written out.
/usr/bin/python3 - "$tmp" <<'PY' || fail "the scaled profiles"
import json, sys
tmp = sys.argv[1]
p = json.load(open(f"{tmp}/profile.json"))
def scaled(k):
    q = json.loads(json.dumps(p))
    for f in ("step_s", "forward_s", "backward_s", "last_backward_s", "other_s", "compute_sd_s"):
        q[f] *= k
    for param in q["params"]:
        param["ready_s"] *= k
    return q
for name, k in (("slow", 1.5), ("mean", 1.25)):
    json.dump(scaled(k), open(f"{tmp}/profile_{name}.json", "w"))
PY
joined=$("$model" --profile "$tmp/profile.json+$tmp/profile_slow.json,$tmp/profile.json" --profile-ranks \
  --link 25gbe --gpus 2 --bucket-mb 1 --csv 2>&1) || fail "scaling_model A+B: $joined"
written=$("$model" --profile "$tmp/profile_mean.json,$tmp/profile.json" --profile-ranks \
  --link 25gbe --gpus 2 --bucket-mb 1 --csv 2>&1) || fail "scaling_model, the mean: $written"
/usr/bin/python3 - <<PY || fail "A+B's prediction against the written mean's"
a = [float(x) for x in """$joined""".splitlines()[-1].split(",")]
b = [float(x) for x in """$written""".splitlines()[-1].split(",")]
assert len(a) == len(b) and all(abs(x - y) <= 1e-3 * max(1.0, abs(y)) for x, y in zip(a, b)), (a, b)
print("A+B ok:", a)
PY
expect_error "$tmp/absent.json" "$model" --profile "$tmp/profile.json+$tmp/absent.json" --link 25gbe

# The contention probe at 2 ranks: 14 steps are 2 warm-up, then 6 loaded
# (1 MiB, 256 KiB, in turn) and 6 quiet; each quiet step times 3
# all-reduces of each size on each rank; the fitted figures are FitContention's over
# what it timed (comm/scaling_model_test.cc checks that arithmetic).
# 64x64 images, batch 16: a backward long enough (about 150 ms) that a
# loaded machine still fits whole all-reduces of each size inside it (beside
# backward each takes 15 ms or more whatever its size; at batch 4, a 40 ms
# backward, `bazel test` beside other tests sometimes fitted none).
timeout 300 mpirun -np 2 --oversubscribe --bind-to none "$train" --model resnet18 --image-size 64 --batch-size 16 \
  --num-classes 10 --threads 1 --steps 14 --log-every 0 --contention-probe "$tmp/contention.json" \
  --contention-probe-mb 1 > "$tmp/contention.log" 2>&1 || { cat "$tmp/contention.log"; fail "the contention probe"; }
/usr/bin/python3 - "$tmp/contention.json" <<'PY' || fail "the contention probe's figures"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "ddp_train contention probe 2" and p["model"] == "resnet18" and p["ranks"] == 2, p
assert p["large"]["bytes"] == 1 << 20 and p["small"]["bytes"] == 1 << 18, p
assert p["loaded_steps"] == 6 and p["quiet_steps"] == 6, p
assert p["quiet_collectives"] == 2 * 6 * 3 * 2 and p["loaded_collectives"] >= 4, p
assert 0 < p["compute_quiet_s"] < 60, p
for load in (p["large"], p["small"]):
    for k in ("backward_s", "collective_quiet_s", "collective_loaded_s"):
        assert 0 < load[k] < 60, (k, p)
    assert load["collectives_per_backward"] >= 1, p
# (Beside backward a sub-millisecond quiet all-reduce can take 30 times
# as long: a slowdown is non-negative and finite, not small.)
for k in ("compute_slowdown", "comm_slowdown", "compute_per_collective_ms", "comm_per_collective_ms"):
    assert 0 <= p[k] < 1e6, (k, p)
# With no compute fixed cost (and no clamp), compute's slowdown is the large
# load's excess over the time its bytes moved (its backward less the
# collectives' fixed cost each).
if p["compute_per_collective_ms"] == 0 and 0 < p["compute_slowdown"] < 19:
    large = p["large"]
    moving = min(max(large["backward_s"] - large["collectives_per_backward"] * p["comm_per_collective_ms"] / 1e3, 0),
                 large["backward_s"])
    sigma = (large["backward_s"] - p["compute_quiet_s"]) / moving
    assert abs(p["compute_slowdown"] - sigma / (1 - sigma)) < 1e-6 * max(1, p["compute_slowdown"]), p
print(f"contention probe ok: compute {p['compute_slowdown']*100:+.0f}% and {p['compute_per_collective_ms']:.2f} ms "
      f"a collective, all-reduce {p['comm_slowdown']*100:+.0f}% and {p['comm_per_collective_ms']:.2f} ms")
PY
grep -q "^ddp_train: contention probe, 2 ranks: backward .* beside all-reduces of 1.00 MiB .* Fitted: compute" \
  "$tmp/contention.log" || fail "no contention probe line in: $(cat "$tmp/contention.log")"

# A link fitted to a comm_bench table made from a known link: 2 ranks at
# 1.25 GB/s and 30 us a hop (2 hops): t = 60 us + bytes / 1.25 GB/s.
{
  echo "# comm_bench: 2 ranks, mpi, f32"
  echo "# allreduce"
  echo "#     size (B)        count    time (us)   algbw GB/s   busbw GB/s  #wrong"
  for bytes in 65536 1048576 16777216; do
    /usr/bin/python3 -c "b=$bytes; t=60+b/1.25e3; print(f'  {b:12d} {b//4:12d} {t:12.1f} {b/t/1e3:12.3f} {b/t/1e3:12.3f}       0')"
  done
} > "$tmp/bench.txt"
"$model" --fit "$tmp/bench.txt" --fit-ranks 2 --name lab > "$tmp/lab.link" || fail "--fit"
grep -Eq '^bus_gbps = 1\.2(49|5)' "$tmp/lab.link" && grep -Eq '^latency_us = (29\.|30)' "$tmp/lab.link" ||
  { cat "$tmp/lab.link"; fail "--fit did not recover 1.25 GB/s and 30 us"; }
"$model" --profile "$tmp/profile.json" --link "$tmp/lab.link" --gpus 2 > /dev/null || fail "a fitted link file"
"$model" --fit "$tmp/bench.txt" --fit-ranks 2 --fit-compute-slowdown 0.3 --fit-comm-slowdown 0.5 \
  --fit-compute-per-collective-ms 1.5 --fit-comm-per-collective-ms 2 > "$tmp/cpu.link" || fail "--fit with CPU contention"
[ "$(grep -c '^shares_compute = true$' "$tmp/cpu.link")" = 1 ] && grep -q '^compute_slowdown = 0.3$' "$tmp/cpu.link" &&
  grep -q '^comm_slowdown = 0.5$' "$tmp/cpu.link" && grep -q '^compute_per_collective_ms = 1.5$' "$tmp/cpu.link" &&
  grep -q '^comm_per_collective_ms = 2$' "$tmp/cpu.link" || { cat "$tmp/cpu.link"; fail "--fit's contention flags"; }
"$model" --profile "$tmp/profile.json" --link "$tmp/cpu.link" --gpus 2 |
  grep -q "compute 30% slower, the collective 50% slower; each collective started beside compute costs it 1.5 ms and itself 2.0 ms more" ||
  fail "a fitted CPU link is not the CPU case"
# --fit-contention: the probe's file fitted anew, the same four figures the
# probe (this build's fit) wrote.
"$model" --fit "$tmp/bench.txt" --fit-ranks 2 --fit-contention "$tmp/contention.json" > "$tmp/probe.link" ||
  fail "--fit-contention"
/usr/bin/python3 - "$tmp/probe.link" "$tmp/contention.json" <<'PY' || { cat "$tmp/probe.link"; fail "--fit-contention's figures"; }
import json, sys
link = dict(l.split(" = ", 1) for l in open(sys.argv[1]).read().splitlines() if " = " in l)
p = json.load(open(sys.argv[2]))
assert link["shares_compute"] == "true", link
for key in ("compute_slowdown", "comm_slowdown", "compute_per_collective_ms", "comm_per_collective_ms"):
    assert abs(float(link[key]) - p[key]) <= 1e-5 * max(1.0, abs(p[key])), (key, link[key], p[key])
print("--fit-contention ok:", {k: link[k] for k in ("compute_slowdown", "comm_per_collective_ms")})
PY
expect_error "not written by ddp_train --contention-probe" "$model" --fit "$tmp/bench.txt" --fit-contention "$tmp/profile.json"
# Several profiles of one configuration average.
"$model" --profile "$tmp/profile.json,$tmp/profile.json" --link "$tmp/lab.link" --gpus 2 --csv > "$tmp/two.csv" &&
  "$model" --profile "$tmp/profile.json" --link "$tmp/lab.link" --gpus 2 --csv > "$tmp/one.csv" &&
  cmp -s "$tmp/one.csv" "$tmp/two.csv" || fail "a profile averaged with itself predicts differently"
grep -q "^pcie4-host-bounce: 12 GB/s" <<< "$("$model" --list-links)" || fail "--list-links"
# --link auto, the default, picks the preset from what the profile says of
# its device and of its node's peer access: each one predicts exactly as
# that preset named.
auto_link() {  # auto_link DEVICE PEER_ACCESS WANT_PRESET
  /usr/bin/python3 - "$tmp/profile.json" "$tmp/auto.json" "$1" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["device"], p["peer_access"] = sys.argv[3], sys.argv[4]
json.dump(p, open(sys.argv[2], "w"))
PY
  local said
  said=$("$model" --profile "$tmp/auto.json" --gpus 2 --csv 2>&1 > "$tmp/auto.csv") || fail "--link auto ($1, '$2')"
  grep -q "^scaling_model: --link auto: $3 (" <<< "$said" || fail "--link auto ($1, '$2'): '$said', want $3"
  "$model" --profile "$tmp/auto.json" --link "$3" --gpus 2 --csv > "$tmp/named.csv" 2> /dev/null &&
    cmp -s "$tmp/auto.csv" "$tmp/named.csv" || fail "--link auto ($1, '$2') predicts unlike --link $3"
}
auto_link cpu "" cpu-shm
auto_link cuda:0 usable pcie4-p2p
auto_link cuda:0 disabled pcie4-host-bounce
auto_link cuda:0 "user setting" pcie4-host-bounce
auto_link cuda:1 "" pcie4-host-bounce

# The model against the published RTX 4090 runs: every batch size, 2 and 4
# GPUs, within 5%; ddp_train's own prediction at 4 GPUs 3.8x or more.
/usr/bin/python3 tools/scaling/rtx4090_scaling --model "$model" --profile tools/scaling/profiles/resnet50_64px_cpu.json \
  > "$tmp/rtx4090.md" 2>&1 || { cat "$tmp/rtx4090.md"; fail "rtx4090_scaling"; }
/usr/bin/python3 - "$tmp/rtx4090.md" <<'PY' || { cat "$tmp/rtx4090.md"; fail "the model against published 4090 runs"; }
import sys
lines = open(sys.argv[1]).read().splitlines()
check = [l.split("|")[1:-1] for l in lines if l.startswith("| ") and l.split("|")[1].strip() in ("64", "128", "256", "512")]
assert len(check) == 4, check
for row in check:
    for column in (5, 8):
        error = abs(float(row[column - 1].strip().rstrip("%")))
        assert error <= 5.0, (row, error)
four = [l for l in lines if l.startswith("| 4, `pcie4-host-bounce-x4`")]
assert four and float(four[0].split("|")[6].strip().rstrip("×")) >= 3.8, four
PY
printf 'bus_gbps = 1\nlatency_us five\n' > "$tmp/bad.link"
expect_error "link file $tmp/bad.link line 2: expected 'key = value', got 'latency_us five'" \
  "$model" --profile "$tmp/profile.json" --link "$tmp/bad.link"
printf 'bus_gbps = 1\nlatency_us = 5\nbandwith = 2\n' > "$tmp/typo.link"
expect_error "line 3: unknown key 'bandwith'" "$model" --profile "$tmp/profile.json" --link "$tmp/typo.link"
expect_error "--link: link 'infiniband' is neither a preset (pcie4-host-bounce" \
  "$model" --profile "$tmp/profile.json" --link infiniband
expect_error "--inter: link 'token-ring' is neither a preset" \
  "$model" --profile "$tmp/profile.json" --nodes 2 --inter token-ring
expect_error "step profile $tmp/metrics.jsonl: not a JSON object" "$model" --profile "$tmp/metrics.jsonl"
expect_error "--profile is required" "$model"
expect_error "--gpus '2,x': 'x' is not a positive number" "$model" --profile "$tmp/profile.json" --gpus 2,x
expect_error "--fit $tmp/profile.json: fewer than two all-reduce rows" "$model" --fit "$tmp/profile.json"
expect_error "--profile-file times eager steps: it cannot be used with --cuda-graphs" \
  "$train" --model resnet18 --steps 1 --cuda-graphs --profile-file "$tmp/p.json"
expect_error "--profile-file /nonexistent/p.json: directory /nonexistent does not exist" \
  "$train" --model resnet18 --steps 1 --profile-file /nonexistent/p.json

finish --pass "all checks passed"
