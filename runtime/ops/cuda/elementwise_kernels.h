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
// counter[0] += 1 (an i64 scalar, BN's num_batches_tracked).
int IncrementI64(int64_t* counter, void* stream);
// dst = src * scale, rounded to nearest even: f32 to bf16 or f16 bits
// (`to_bf16` picks which), and back.
int CastF32To16(const float* src, float scale, uint16_t* dst, bool to_bf16, int64_t n, void* stream);
int Cast16ToF32(const uint16_t* src, float scale, float* dst, bool from_bf16, int64_t n, void* stream);

}  // namespace ddp::cuda
