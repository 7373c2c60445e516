# Sourced by the shell tests (from the runfiles root, their working
# directory: `source tests/lib.sh`; list it in the sh_test's data):
#   tmp       a scratch folder: Bazel's TEST_TMPDIR, or a new one outside Bazel
#   fail MSG  prints "FAIL: MSG" and counts a failure; the test goes on
#   finish    the verdict and the exit status (below)
#   resnet18_data N   N test images and the flags that train ResNet-18 on them
#   one, many        compared runs of $bin (below)
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# finish NAME: "NAME: all passed" and exit 0, or "NAME: N failure(s)" and
# exit 1.
# finish --pass LINE: LINE and exit 0, or "N failure(s)" and exit 1.
finish() {
  if [ "$1" = --pass ]; then
    [ "$failures" -eq 0 ] && echo "$2" && exit 0
    echo "$failures failure(s)"
    exit 1
  fi
  [ "$failures" -eq 0 ] && echo "$1: all passed" && exit 0
  echo "$1: $failures failure(s)"
  exit 1
}

# resnet18_data N: N images (32x32, 10 classes) in $tmp/data.safetensors
# (tools/make_image_dataset in the sh_test's data), and resnet18_flags, the
# flags that train ResNet-18 on them.
resnet18_data() {
  tools/make_image_dataset --out "$tmp/data.safetensors" --samples "$1" --image-size 32 --num-classes 10 \
    > /dev/null || { echo "FAIL: tools/make_image_dataset"; exit 1; }
  resnet18_flags=(--model resnet18 --image-size 32 --num-classes 10 --data "tensors:$tmp/data.safetensors")
}

# one NAME ARGS...: $bin with the caller's "${common[@]}" and ARGS on one
# rank; many NAME NP ARGS...: the same on NP ranks under mpirun. Each writes
# $tmp/NAME.jsonl (metrics), $tmp/NAME.safetensors (final weights) and
# $tmp/NAME.log, which a failure prints.
one() {
  local name="$1"; shift
  timeout 300 "$bin" "${common[@]}" "$@" --metrics-file "$tmp/$name.jsonl" \
    --save-weights "$tmp/$name.safetensors" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name"; }
}
many() {
  local name="$1" np="$2"; shift 2
  timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$bin" "${common[@]}" "$@" \
    --metrics-file "$tmp/$name.jsonl" --save-weights "$tmp/$name.safetensors" > "$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; fail "$name"; }
}
