#!/usr/bin/env bash
# ddp_train's command line: a short run succeeds and reports a summary; bad
# input gets one clear line naming the flag and a non-zero exit.
set -u
bin="launch/ddp_train"
failures=0

expect_error() {  # expect_error "<fragment>" args...
  local fragment="$1"; shift
  local out rc
  out=$("$bin" "$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ]; then echo "FAIL: ddp_train $* exited 0"; failures=$((failures + 1)); return; fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then
    echo "FAIL: ddp_train $* printed more than one line:"; printf '%s\n' "$out"; failures=$((failures + 1)); return
  fi
  case "$out" in
    *"$fragment"*) echo "ok: $*: $out" ;;
    *) echo "FAIL: ddp_train $*: expected '$fragment' in: $out"; failures=$((failures + 1)) ;;
  esac
}

expect_error "--model 'resnet9000' is unknown" --model resnet9000
expect_error "--batch-size must be at least 2" --batch-size 0
expect_error "--batch-size must be at least 2" --batch-size=-4
expect_error "--steps must be positive" --steps 0
expect_error "unknown command line flag 'bogus'" --bogus 1
expect_error "--lr must be a positive number" --lr nan
expect_error "unexpected argument 'extra'" extra

out=$("$bin" --steps 3 --batch-size 4 --image-size 8 --threads 1 2>&1); rc=$?
if [ "$rc" -ne 0 ]; then echo "FAIL: short run exited $rc:"; echo "$out"; failures=$((failures + 1));
elif ! printf '%s\n' "$out" | grep -q '^summary: model tiny-cnn  steps 3 '; then
  echo "FAIL: no summary line:"; echo "$out"; failures=$((failures + 1))
else echo "ok: short run"; fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
