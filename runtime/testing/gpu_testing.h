// The one way a GPU test case skips: without a usable device, naming why.
// The self-test counts a skip for want of a GPU as a failure on a GPU
// machine (tools/gpu/bundle/selftest.py), so every reason here is one it
// knows.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"

namespace ddp::testing {

// "" when `needed` devices can take GPU cases; else "built without CUDA",
// "no CUDA device visible", "CUDA cannot start: " and CUDA's own reason (an
// old driver, a failed initialization), or, with some GPUs but too few,
// "needs N GPUs, M visible" (a case with one rank per GPU).
inline std::string NoGpuReason(int needed = 1) {
  if (!cuda::BuiltWithCuda()) return "built without CUDA";
  const cuda::DeviceQuery devices = cuda::QueryDevices();
  if (devices.count >= needed) return "";
  if (devices.count > 0) {
    return "needs " + std::to_string(needed) + " GPUs, " + std::to_string(devices.count) + " visible";
  }
  return devices.error.empty() ? "no CUDA device visible" : "CUDA cannot start: " + devices.error;
}

// Device `device` made current with a new stream as its current (compute)
// stream, as a rank sets itself up; on leaving scope the stream is waited
// for, unset and destroyed. What is declared after it (a communicator, a
// trainer, their tensors) is released first.
class ComputeStream {
 public:
  explicit ComputeStream(int device) : device_(device) {
    cuda::SetDevice(device);
    stream_ = cuda::CreateStream();
    cuda::SetCurrentStream(device, stream_);
  }
  ~ComputeStream() {
    cuda::Synchronize(stream_);
    cuda::SetCurrentStream(device_, nullptr);
    cuda::DestroyStream(stream_);
  }
  ComputeStream(const ComputeStream&) = delete;
  ComputeStream& operator=(const ComputeStream&) = delete;
  void* get() const { return stream_; }

 private:
  int device_;
  void* stream_ = nullptr;
};

}  // namespace ddp::testing

// In a TEST body or a fixture's SetUp: skip the case, naming why, unless
// `n` GPUs (DDP_SKIP_WITHOUT_GPUS) or one can run it.
#define DDP_SKIP_WITHOUT_GPUS(n)                                                                   \
  do {                                                                                             \
    if (const std::string ddp_no_gpu = ::ddp::testing::NoGpuReason(n); !ddp_no_gpu.empty()) {     \
      GTEST_SKIP() << ddp_no_gpu;                                                                  \
    }                                                                                              \
  } while (false)
#define DDP_SKIP_WITHOUT_GPU() DDP_SKIP_WITHOUT_GPUS(1)
