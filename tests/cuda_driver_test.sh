#!/usr/bin/env bash
# "No GPU" is told apart from "a driver that cannot start CUDA", without a
# GPU: a stand-in libcuda.so.1 that exports nothing CUDA wants makes the
# runtime fail to start. gpu_info then exits 4 with CUDA's reason (3 where
# no driver is installed, as on this machine), and ddp_train refuses
# --device auto and cuda with one line naming that reason instead of
# quietly training on the CPU; --device cpu still trains.
set -u
source tests/lib.sh

plain=$(tools/gpu_info)
plain_rc=$?
case "$plain" in
  *'"built_with_cuda": false'*)
    [ "$plain_rc" -eq 3 ] || fail "a build without CUDA: gpu_info exit $plain_rc (want 3)"
    echo "built without CUDA: gpu_info says so ($plain), exit $plain_rc; no CUDA runtime to start"
    [ "$failures" -eq 0 ] && exit 0
    exit 1 ;;
esac
case "$plain_rc" in
  0) echo "this machine has a GPU: $plain" ;;
  3) case "$plain" in *cuda_error*) fail "no driver here, yet gpu_info reports an error: $plain" ;; esac ;;
  *) fail "gpu_info on this machine: exit $plain_rc: $plain" ;;
esac

mkdir -p "$tmp/driver"
printf 'int ddp_not_a_cuda_driver;\n' > "$tmp/driver/stub.c"
cc -shared -fPIC -o "$tmp/driver/libcuda.so.1" "$tmp/driver/stub.c" || { echo "FAIL: cannot build the stand-in driver"; exit 1; }

broken=$(LD_LIBRARY_PATH="$tmp/driver" tools/gpu_info)
rc=$?
[ "$rc" -eq 4 ] || fail "a driver that cannot start CUDA: gpu_info exit $rc (want 4): $broken"
reason=$(printf '%s' "$broken" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("cuda_error", ""))')
case "$reason" in *"(cudaError"*")") ;; *) fail "gpu_info names no CUDA error: $broken" ;; esac
echo "stand-in driver: gpu_info exit $rc, cuda_error: $reason"

common=(--model resnet18 --image-size 32 --num-classes 10 --batch-size 2 --steps 1 --threads 1)
for device in auto cuda; do
  LD_LIBRARY_PATH="$tmp/driver" launch/ddp_train "${common[@]}" --device "$device" > "$tmp/$device.out" 2> "$tmp/$device.err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "--device $device with the stand-in driver: exit $rc (want 1)"
  want="ddp_train: error: --device $device: the NVIDIA driver is installed but CUDA cannot start: $reason; fix the driver, or train on the CPU with --device cpu"
  [ "$(cat "$tmp/$device.err")" = "$want" ] || { cat "$tmp/$device.err"; fail "--device $device: not the one line '$want'"; }
done
LD_LIBRARY_PATH="$tmp/driver" launch/ddp_train "${common[@]}" --device cpu > "$tmp/cpu.out" 2>&1 ||
  { cat "$tmp/cpu.out"; fail "--device cpu with the stand-in driver did not train"; }

finish "cuda driver test"
