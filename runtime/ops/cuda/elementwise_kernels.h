// CUDA kernels behind runtime/ops/elementwise.h. Pointers are device
// pointers; `stream` is a cudaStream_t. Each returns the launch's
// cudaError_t (0 on success) for the caller to check.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace ddp::cuda {

// Activations: `dtype` is f32, bf16 or f16 for every operand, computed in
// f32 and rounded to nearest even.
int Add(DType dtype, const void* a, const void* b, void* out, int64_t n, void* stream);
int ReluForward(DType dtype, const void* x, void* y, int64_t n, void* stream);
int ReluBackward(DType dtype, const void* y, const void* dy, void* dx, int64_t n, void* stream);
int AxpyF32(float alpha, const float* x, float* y, int64_t n, void* stream);
int ScaleF32(float alpha, float* x, int64_t n, void* stream);
// counter[0] += 1 (an i64 scalar, BN's num_batches_tracked).
int IncrementI64(int64_t* counter, void* stream);
// dst = src * scale, rounded to nearest even: f32 to bf16 or f16 bits
// (`to_bf16` picks which), and back.
int CastF32To16(const float* src, float scale, uint16_t* dst, bool to_bf16, int64_t n, void* stream);
int Cast16ToF32(const uint16_t* src, float scale, float* dst, bool from_bf16, int64_t n, void* stream);
// dst = src as [N, C, HW] in another memory format and/or activation dtype
// (f32, bf16, f16), rounded to nearest even when narrowing.
int ConvertLayout(DType src_dtype, const void* src, bool src_channels_last, DType dst_dtype, void* dst,
                  bool dst_channels_last, int64_t n, int64_t c, int64_t hw, void* stream);

}  // namespace ddp::cuda
