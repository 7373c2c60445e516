// The one way a GPU test case skips: without a usable device, naming why.
// The self-test counts a skip for want of a GPU as a failure on a GPU
// machine (tools/gpu/bundle/selftest.py), so every reason here is one it
// knows.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"

namespace ddp::testing {

// "" when device 0 can take GPU cases; else "built without CUDA", "no CUDA
// device visible", or "CUDA cannot start: " and CUDA's own reason (an old
// driver, a failed initialization).
inline std::string NoGpuReason() {
  if (!cuda::BuiltWithCuda()) return "built without CUDA";
  const cuda::DeviceQuery devices = cuda::QueryDevices();
  if (devices.count > 0) return "";
  return devices.error.empty() ? "no CUDA device visible" : "CUDA cannot start: " + devices.error;
}

}  // namespace ddp::testing

// In a TEST body or a fixture's SetUp: skip the case, naming why, unless a
// GPU can run it.
#define DDP_SKIP_WITHOUT_GPU()                                                                     \
  do {                                                                                             \
    if (const std::string ddp_no_gpu = ::ddp::testing::NoGpuReason(); !ddp_no_gpu.empty()) {      \
      GTEST_SKIP() << ddp_no_gpu;                                                                  \
    }                                                                                              \
  } while (false)
