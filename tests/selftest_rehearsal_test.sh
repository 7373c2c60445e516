#!/usr/bin/env bash
# The GPU self-test rehearsed on CPU ranks, from a bundle packed here from
# the built programs: the same commands, checks, parsing and report as on a
# GPU. The verdict passes and report.json lists every tier with its status,
# seconds and checks (a passed tier has a passed check; the equivalence and
# bert tiers compare ZeRO 3 with ZeRO 0); a failure injected
# into a tier (DDP_SELFTEST_INJECT) turns that tier, and the verdict, to
# failed through the tier's own comparison; a budget too small for a tier
# reports it skipped (budget) and the verdict incomplete; without a GPU and
# without --rehearse, one line and exit 3.
set -u
source tests/lib.sh
export PATH="/usr/bin:/bin:$PATH" DDP_SELFTEST_PYTHON=/usr/bin/python3

bash tools/gpu/bundle/pack.sh "$tmp/bundle" launch/ddp_train tests/gpu_tests tools/gpu_info tools/make_image_dataset \
  tools/compare_weights tools/make_image_folder tools/tokenize_text > "$tmp/pack.log" 2>&1 ||
  { cat "$tmp/pack.log"; echo "FAIL: the bundle does not pack"; exit 1; }

# The bundle's directory is made anew: never one that holds a program packed.
mkdir -p "$tmp/held" && cp tools/gpu_info "$tmp/held/gpu_info"
bash tools/gpu/bundle/pack.sh "$tmp/held" "$tmp/held/gpu_info" > "$tmp/held.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && [ -x "$tmp/held/gpu_info" ] &&
  grep -q "^pack.sh: OUT $tmp/held holds $tmp/held/gpu_info, which making it anew would delete" "$tmp/held.log" ||
  { cat "$tmp/held.log"; fail "pack.sh into the directory of its program: exit $rc"; }

# What the bundle's mpirun starts gets the environment env.sh made: no
# LD_LIBRARY_PATH into the bundle (a host's /bin/sh, which starts each
# wrapper, would load the bundled glibc and fail where the host's is newer),
# and every plugin Open MPI, PMIx and hwloc load is the bundle's (a host's
# are other versions, built for another glibc). LD_DEBUG=files names each
# library loaded at run time, in a file per process (LD_DEBUG_OUTPUT: on
# the shared stderr the ranks' lines interleave).
"$tmp/bundle/bin/mpirun" -np 1 /usr/bin/env > "$tmp/env.txt" 2>&1 || { cat "$tmp/env.txt"; fail "mpirun -np 1 env"; }
if grep "^LD_LIBRARY_PATH=.*$tmp/bundle" "$tmp/env.txt"; then fail "the bundle's mpirun puts the bundle on LD_LIBRARY_PATH"; fi
LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/lddebug" "$tmp/bundle/bin/mpirun" -np 2 "$tmp/bundle/bin/ddp_train" --device cpu --threads 1 --model resnet18 \
  --image-size 32 --num-classes 10 --batch-size 2 --steps 1 > "$tmp/plugins.log" 2>&1 ||
  { tail -n 30 "$tmp/plugins.log"; fail "2 ranks under the bundle's mpirun"; }
plugins=$(cat "$tmp"/lddebug.* | grep "dynamically loaded by" | grep -o "file=/[^ ]*" | sort -u)
[ "$(grep -c "/pmix_mca_\|/mca_" <<< "$plugins")" -gt 0 ] || fail "LD_DEBUG=files showed no plugin loaded"
outside=$(grep -v "file=$tmp/bundle/" <<< "$plugins" | grep -v "libcuda\.so" || true)
[ -z "$outside" ] || fail "plugins loaded from outside the bundle: $(tr '\n' ' ' <<< "$outside")"

# report OUT CHECKS...: report.json's facts, by a Python expression each
# over `r` (the report) and `tiers` (name -> tier).
report() {
  local out=$1; shift
  /usr/bin/python3 - "$out/report.json" "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
tiers = {t["tier"]: t for t in r["tiers"]}
bad = [c for c in sys.argv[2:] if not eval(c)]
for c in bad:
    print("FAIL: report.json:", c)
sys.exit(1 if bad else 0)
PY
}
names='["versions", "gpu_tests", "training", "equivalence", "bert", "checkpoint", "mixed_precision", "memory",
        "memory_plan", "watchdog", "data", "bert_interop", "benchmarks"]'

start=$(date +%s)
"$tmp/bundle/selftest.sh" --rehearse "$tmp/ok" > "$tmp/ok.log" 2>&1
rc=$?
seconds=$(( $(date +%s) - start ))
[ "$rc" -eq 0 ] || { cat "$tmp/ok.log"; fail "the rehearsal: exit $rc (want 0)"; }
report "$tmp/ok" 'r["verdict"] == "passed" and r["rehearsal"] and r["device"] == "cpu"' \
  "[t['tier'] for t in r['tiers']] == $names" \
  'all(t["status"] in ("passed", "skipped") and t["seconds"] >= 0 and t["limit_s"] > 0 for t in r["tiers"])' \
  'all(any(c["status"] == "passed" for c in t["checks"]) for t in r["tiers"] if t["status"] == "passed")' \
  'all(t["reason"] for t in r["tiers"] if t["status"] == "skipped")' \
  'sum(t["status"] == "passed" for t in r["tiers"]) >= 12' \
  'all(any(c["status"] == "passed" and c["name"].startswith("ZeRO 3 vs ZeRO 0") for c in tiers[n]["checks"]) for n in ("equivalence", "bert"))' \
  'all(v["ddp_train"] > 0 and v["pytorch"] > 0 for v in r["benchmarks"].values()) and len(r["benchmarks"]) == 2' \
  '"passed" in open(sys.argv[1].replace("report.json", "report.md")).read()' || fail "the rehearsal's report"
echo "rehearsal: exit $rc in $seconds s; $(tail -n 1 "$tmp/ok.log")"

# An injected failure: the tier's comparison fails, and so does the verdict;
# the tier beside it still passes.
DDP_SELFTEST_INJECT=equivalence,memory_plan,benchmarks "$tmp/bundle/selftest.sh" --rehearse \
  --only versions,equivalence,memory_plan,benchmarks "$tmp/injected" > "$tmp/injected.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/injected.log"; fail "injected: exit $rc (want 1)"; }
report "$tmp/injected" 'r["verdict"] == "failed" and not r["passed"]' \
  'tiers["versions"]["status"] == "passed"' \
  'tiers["equivalence"]["status"] == "failed" and any(c["status"] == "failed" and "losses" in c["name"] for c in tiers["equivalence"]["checks"])' \
  'tiers["benchmarks"]["status"] == "failed" and all("a figure is missing" in c["detail"] for c in tiers["benchmarks"]["checks"])' \
  'tiers["memory_plan"]["status"] == "failed" and [c["status"] for c in tiers["memory_plan"]["checks"] if "trains a step" in c["name"]] == ["failed", "failed"]' \
  'tiers["training"]["status"] == "skipped" and tiers["training"]["reason"] == "not selected (--only)"' ||
  fail "the injected run's report"
grep -q "^selftest: failed: " "$tmp/injected.log" || fail "injected: no closing 'failed' line"

# Nothing failed but a tier left out, or cut by the budget: incomplete. (A
# later tier whose limit still fits runs.)
"$tmp/bundle/selftest.sh" --rehearse --only versions "$tmp/only" > "$tmp/only.log" 2>&1
rc=$?
[ "$rc" -eq 4 ] || { cat "$tmp/only.log"; fail "--only versions: exit $rc (want 4)"; }
report "$tmp/only" 'r["verdict"] == "incomplete"' 'tiers["versions"]["status"] == "passed"' || fail "--only's report"
DDP_SELFTEST_BUDGET_S=35 "$tmp/bundle/selftest.sh" --rehearse "$tmp/budget" > "$tmp/budget.log" 2>&1
rc=$?
[ "$rc" -eq 4 ] || { cat "$tmp/budget.log"; fail "a 35 s budget: exit $rc (want 4)"; }
report "$tmp/budget" 'r["verdict"] == "incomplete"' 'tiers["versions"]["status"] == "passed"' \
  'tiers["gpu_tests"]["status"] == "skipped" and tiers["gpu_tests"]["reason"].startswith("budget:")' \
  'tiers["benchmarks"]["status"] == "skipped" and tiers["benchmarks"]["reason"].startswith("budget:")' \
  'all(t["status"] != "failed" for t in r["tiers"])' || fail "the budget's report"
grep -q "^selftest: tier gpu_tests: skipped (budget: " "$tmp/budget.log" || fail "the budget: no line naming the tier"

# Without a GPU, a GPU run says so in one line: exit 3.
"$tmp/bundle/selftest.sh" "$tmp/nogpu" > "$tmp/nogpu.log" 2>&1
rc=$?
[ "$rc" -eq 3 ] && [ "$(grep -c . "$tmp/nogpu.log")" -eq 1 ] && grep -q "^selftest: no GPU visible" "$tmp/nogpu.log" ||
  { cat "$tmp/nogpu.log"; fail "no GPU: exit $rc"; }

# Unless DDP_SELFTEST_PYTHON names one, the Python is the first that imports
# torch (the benchmarks' peer), not merely the first python3 on PATH (a
# pyenv one, say); one line, as the tiers start, says which, and which
# were tried, and the report keeps it.
mkdir -p "$tmp/notorch"
printf '#!/bin/sh\ncase "$*" in *"import torch"*) exit 1 ;; esac\nexec /usr/bin/python3 "$@"\n' > "$tmp/notorch/python3"
chmod +x "$tmp/notorch/python3"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  picked=$(env -u DDP_SELFTEST_PYTHON PATH="$tmp/notorch:/usr/bin:/bin" "$tmp/bundle/selftest.sh" --rehearse \
           --only versions "$tmp/pick" 2>&1)
  want="selftest: Python /usr/bin/python3, which imports torch (tried: $tmp/notorch/python3 /usr/bin/python3)"
  grep -qxF "$want" <<< "$picked" || { echo "$picked"; fail "the Python that imports torch was not chosen"; }
  report "$tmp/pick" "r['python'] == '''${want#selftest: }'''" || fail "the report does not name the Python"
  named=$(PATH="$tmp/notorch:/usr/bin:/bin" DDP_SELFTEST_PYTHON="$tmp/notorch/python3" "$tmp/bundle/selftest.sh" \
          --rehearse --only versions "$tmp/pick2" 2>&1)
  grep -qxF "selftest: Python $tmp/notorch/python3 (DDP_SELFTEST_PYTHON)" <<< "$named" ||
    { echo "$named"; fail "DDP_SELFTEST_PYTHON was not taken as given"; }
else
  echo "SKIP: the Python choice: /usr/bin/python3 does not import torch here"
fi
finish "selftest rehearsal test"
