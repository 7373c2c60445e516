// The activation types CUDA kernels compute on: f32, bf16 and f16 (mixed
// precision), loaded into f32 registers and rounded to nearest even on
// store. Kernels are templates over the storage type S (float,
// __nv_bfloat16, __half); DispatchFloat picks S from a DType on the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <glog/logging.h>

#include "runtime/dtype.h"

namespace ddp::cuda {

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }

template <typename S>
__device__ __forceinline__ S FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}

// Calls run(S()) with S the storage type of `dtype`.
template <typename Run>
void DispatchFloat(DType dtype, const char* op, Run&& run) {
  switch (dtype) {
    case DType::kF32: run(float()); return;
    case DType::kBF16: run(__nv_bfloat16()); return;
    case DType::kF16: run(__half()); return;
    default: LOG(FATAL) << op << " has no CUDA kernel for " << DTypeName(dtype);
  }
}

}  // namespace ddp::cuda
