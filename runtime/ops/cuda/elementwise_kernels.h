// CUDA kernels behind runtime/ops/elementwise.h. Pointers are device
// pointers; `stream` is a cudaStream_t. Each returns the launch's
// cudaError_t (0 on success) for the caller to check.
#pragma once

#include <cstdint>

namespace ddp::cuda {

int AddF32(const float* a, const float* b, float* out, int64_t n, void* stream);
int AxpyF32(float alpha, const float* x, float* y, int64_t n, void* stream);
int ScaleF32(float alpha, float* x, int64_t n, void* stream);
int ReluForwardF32(const float* x, float* y, int64_t n, void* stream);
int ReluBackwardF32(const float* y, const float* dy, float* dx, int64_t n, void* stream);

}  // namespace ddp::cuda
