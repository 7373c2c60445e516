// Implemented in cuda_runtime.cu, compiled only when nvcc exists; callers go
// through cuda_device.h.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace ddp::cuda::impl {

int DeviceCount();
void Check(int error, const char* call, const char* file, int line);
void SetDevice(int index);
std::string DeviceUuid(int index);
void Synchronize(void* stream);
void CopyTensor(const Tensor& src, Tensor& dst, void* stream);

}  // namespace ddp::cuda::impl
