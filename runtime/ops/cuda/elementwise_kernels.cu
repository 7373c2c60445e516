#include "runtime/ops/cuda/elementwise_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace ddp::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops with 64-bit indices: any n launches at most a bounded grid.
template <typename Op>
__global__ void ElementwiseKernel(int64_t n, Op op) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    op(i);
  }
}

template <typename Op>
int Launch(int64_t n, void* stream, Op op) {
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  ElementwiseKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, op);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int AddF32(const float* a, const float* b, float* out, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { out[i] = a[i] + b[i]; });
}

int AxpyF32(float alpha, const float* x, float* y, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { y[i] += alpha * x[i]; });
}

int ScaleF32(float alpha, float* x, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { x[i] *= alpha; });
}

int ReluForwardF32(const float* x, float* y, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) {
    // NaN stays NaN, as in PyTorch and the CPU path.
    y[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
  });
}

int ReluBackwardF32(const float* y, const float* dy, float* dx, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { dx[i] = y[i] <= 0.0f ? 0.0f : dy[i]; });
}

int IncrementI64(int64_t* counter, void* stream) {
  return Launch(1, stream, [=] __device__(int64_t) { counter[0] += 1; });
}

int CastF32To16(const float* src, float scale, uint16_t* dst, bool to_bf16, int64_t n, void* stream) {
  if (to_bf16) {
    return Launch(n, stream,
                  [=] __device__(int64_t i) { dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i] * scale)); });
  }
  return Launch(n, stream, [=] __device__(int64_t i) { dst[i] = __half_as_ushort(__float2half_rn(src[i] * scale)); });
}

int Cast16ToF32(const uint16_t* src, float scale, float* dst, bool from_bf16, int64_t n, void* stream) {
  if (from_bf16) {
    return Launch(n, stream,
                  [=] __device__(int64_t i) { dst[i] = __bfloat162float(__ushort_as_bfloat16(src[i])) * scale; });
  }
  return Launch(n, stream, [=] __device__(int64_t i) { dst[i] = __half2float(__ushort_as_half(src[i])) * scale; });
}

}  // namespace ddp::cuda
