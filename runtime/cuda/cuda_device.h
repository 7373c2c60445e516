// The CUDA runtime as the rest of the code sees it, with no CUDA headers:
// device discovery, checked calls, device memory and copies. In a build
// without CUDA, DeviceCount() is 0 and nothing else may be called.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace ddp::cuda {

// True when this binary was built with CUDA kernels.
bool BuiltWithCuda();
// Usable devices: 0 without CUDA in the build, without a driver, or with no
// GPU visible (CUDA_VISIBLE_DEVICES is respected by the driver).
int DeviceCount();
// Fatal unless `error` (a cudaError_t) is cudaSuccess; names the call and
// CUDA's reason.
void Check(int error, const char* call, const char* file, int line);
void SetDevice(int index);
// The device's UUID as nvidia-smi prints it ("GPU-6a1b2c3d-..."): the same
// physical GPU gives the same string in every process, whatever
// CUDA_VISIBLE_DEVICES calls it.
std::string DeviceUuid(int index);
// Waits for all work on `stream` (a cudaStream_t; null: the default stream).
void Synchronize(void* stream);
// Copies between host and device tensors of equal dtype and element count,
// in either direction, then waits for the copy.
void CopyTensor(const Tensor& src, Tensor& dst, void* stream);

}  // namespace ddp::cuda

#define DDP_CUDA_CHECK(call) ::ddp::cuda::Check(static_cast<int>(call), #call, __FILE__, __LINE__)
