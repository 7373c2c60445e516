# Sourced by the shell tests (from the runfiles root, their working
# directory: `source tests/lib.sh`; list it in the sh_test's data):
#   tmp       a scratch folder: Bazel's TEST_TMPDIR, or a new one outside Bazel
#   fail MSG  prints "FAIL: MSG" and counts a failure; the test goes on
#   finish    the verdict and the exit status (below)
#   resnet18_data N   N test images and the flags that train ResNet-18 on them
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
