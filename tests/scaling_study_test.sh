#!/usr/bin/env bash
# tools/scaling/scaling_study at 1 and 2 ranks (ResNet-18, 32x32): the report, the
# CSV (speedup and E(N) consistent with the measured throughputs, the
# contention-free reference and the model's prediction present at 2), the
# PNG (a real image: its header's size, and pixels of many colours, not a
# blank page); the same study again from the metrics files; bad input is
# one line and exit 2. Run at --zero-stage 1: the flag reaches the runs and
# the prediction, and the MiB sent a step are the summaries'.
set -u
study=tools/scaling/scaling_study
source tests/lib.sh

"$study" --ranks 1,2 --image-size 32 --batch-size 4 --steps 5 --zero-stage 1 --link cpu-shm --out "$tmp/study" \
  > "$tmp/study.log" 2>&1 ||
  { cat "$tmp/study.log"; fail "the study"; }
cat "$tmp/study/report.md"
/usr/bin/python3 - "$tmp/study" <<'PY' || fail "the study's files"
import csv, json, os, struct, sys, zlib
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/scaling.csv")))
assert [int(r["ranks"]) for r in rows] == [1, 2], rows
one, two = float(rows[0]["samples_per_s"]), float(rows[1]["samples_per_s"])
# The CSV's throughput is the runs' own summary figure.
summary = json.loads(open(f"{d}/n2_r0.jsonl").read().splitlines()[-1])["summary"]
assert abs(two - summary["samples_per_s"]) < 1e-3 * two and summary["world_size"] == 2, (two, summary)
assert abs(float(rows[1]["speedup"]) - two / one) < 1e-3 and abs(float(rows[1]["efficiency"]) - two / one / 2) < 1e-3
assert rows[0]["reference_samples_per_s"] == "" and float(rows[1]["reference_samples_per_s"]) > 0
assert abs(float(rows[1]["efficiency_vs_reference"]) - two / float(rows[1]["reference_samples_per_s"])) < 1e-3
assert float(rows[1]["predicted_samples_per_s"]) > 0 and float(rows[1]["exposed_comm_ms"]) >= 0
# --zero-stage reaches the runs; the MiB sent a step are the summary's.
sent = summary["comm_bytes_per_step"]
assert summary["zero_stage"] == 1 and sent["reduce_scatter"] > 0 and sent["all_gather"] > 0, summary
assert abs(float(rows[1]["sent_mib_per_step"]) - sent["total"] / 2**20) < 1e-3 and rows[0]["sent_mib_per_step"] == "0.000"
report = open(f"{d}/report.md").read()
assert "| 2 |" in report and "![scaling](scaling.png)" in report, report
png = open(f"{d}/scaling.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, len(png)
width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
assert (width, height) == (900, 900) and depth == 8, (width, height, depth)
at, idat = 8, b""
while at < len(png):
    n = struct.unpack(">I", png[at:at + 4])[0]
    if png[at + 4:at + 8] == b"IDAT":
        idat += png[at + 8:at + 8 + n]
    at += 12 + n
pixels = zlib.decompress(idat)
channels = {2: 3, 6: 4}[colour]
stride = 1 + width * channels
body = b"".join(pixels[y * stride + 1:(y + 1) * stride] for y in range(height))  # filters aside: byte statistics
assert len(set(body)) > 40, len(set(body))
white = body.count(b"\xff")
assert white < 0.99 * len(body), white / len(body)
print(f"study ok: 1 rank {one:.1f}/s, 2 ranks {two:.1f}/s, png {width}x{height}, {len(set(body))} byte values")
PY
"$study" --from-metrics "$tmp/study/n1_r0.jsonl" "$tmp/study/n2_r0.jsonl" --out "$tmp/again" > "$tmp/again.log" 2>&1 ||
  { cat "$tmp/again.log"; fail "--from-metrics"; }
cut -d, -f1-4,11 "$tmp/study/scaling.csv" > "$tmp/a.csv"
cut -d, -f1-4,11 "$tmp/again/scaling.csv" > "$tmp/b.csv"
cmp -s "$tmp/a.csv" "$tmp/b.csv" || { cat "$tmp/a.csv" "$tmp/b.csv"; fail "--from-metrics gave other figures"; }
[ -s "$tmp/again/scaling.png" ] || fail "--from-metrics made no plot"

expect_error() {  # expect_error "<fragment>" args...
  local fragment="$1" out rc
  shift
  out=$("$study" "$@" 2>&1); rc=$?
  [ "$rc" = 2 ] || { fail "scaling_study $* exited $rc: $out"; return; }
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { fail "scaling_study $* printed more than one line: $out"; return; }
  case "$out" in *"$fragment"*) echo "ok: $out" ;; *) fail "expected '$fragment' in: $out" ;; esac
}
expect_error "--ranks must start at 1 and increase, got 2,1" --ranks 2,1 --out "$tmp/x"
expect_error "--ranks 'one,2' is not a comma-separated list" --ranks one,2 --out "$tmp/x"
expect_error "--zero-stage must be 0, 1, 2 or 3, got 4" --zero-stage 4 --out "$tmp/x"
expect_error "--from-metrics: no single-rank run among the files" --from-metrics "$tmp/study/n2_r0.jsonl" --out "$tmp/x"
expect_error "metrics file /nonexistent.jsonl:" --from-metrics /nonexistent.jsonl --out "$tmp/x"
# Its outputs never land on its inputs, by name or through a link.
cp "$tmp/study/n1_r0.jsonl" "$tmp/scaling.csv"
sum=$(cksum < "$tmp/scaling.csv")
expect_error "--out $tmp would write scaling.csv over the --from-metrics file $tmp/scaling.csv; choose another --out" \
  --from-metrics "$tmp/scaling.csv" "$tmp/study/n2_r0.jsonl" --out "$tmp"
ln -sf "$tmp/scaling.csv" "$tmp/report.md"  # report.md, written through the link, is the input
expect_error "--out $tmp would write report.md over the --from-metrics file $tmp/scaling.csv" \
  --from-metrics "$tmp/scaling.csv" "$tmp/study/n2_r0.jsonl" --out "$tmp"
[ "$(cksum < "$tmp/scaling.csv")" = "$sum" ] || fail "scaling_study wrote over its input"
expect_error "--out $tmp/scaling.csv is a file; give a directory" --from-metrics "$tmp/study/n1_r0.jsonl" --out "$tmp/scaling.csv"

finish --pass "all checks passed"
