#!/usr/bin/env bash
# The straggler report under a real mpirun: rank 1 of 3 slowed on purpose
# (DDP_TEST_SLOW_RANK, 300 ms in each step's forward) is named in one
# warning; the summary's compute_s spread has it as the slowest rank, with
# a median compute time above the others', and its comm_wait_s as the
# least (the fast ranks wait for it in the collectives).
set -u
bin=launch/ddp_train
source tests/lib.sh

DDP_TEST_SLOW_RANK=1:300 timeout 180 mpirun -np 3 --oversubscribe --bind-to none -x DDP_TEST_SLOW_RANK "$bin" \
  --model resnet18 --image-size 32 --batch-size 4 --steps 8 --threads 1 --metrics-file "$tmp/m.jsonl" \
  > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "the run"; }
[ "$(grep -c 'is a straggler' "$tmp/run.log")" = 1 ] &&
  grep -q "^ddp_train: warning: rank 1 is a straggler: its median compute time, [0-9.]* s a step, is [0-9]*% above the other ranks' [0-9.]* s" \
    "$tmp/run.log" || { cat "$tmp/run.log"; fail "rank 1 was not named once as the straggler"; }
/usr/bin/python3 - "$tmp/m.jsonl" <<'PY' || fail "the summary's spreads"
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])["summary"]
c, w = s["compute_s"], s["comm_wait_s"]
print(f"compute by rank {[round(x, 3) for x in c['by_rank']]}, collective wait by rank {[round(x, 3) for x in w['by_rank']]}")
assert c["slowest_rank"] == 1 and c["max"] == c["by_rank"][1] and len(c["by_rank"]) == 3, c
assert c["by_rank"][1] > 1.5 * max(c["by_rank"][0], c["by_rank"][2]), c
assert c["min"] <= c["median"] <= c["max"]
assert w["by_rank"][1] == w["min"], w
PY
finish "straggler test"
