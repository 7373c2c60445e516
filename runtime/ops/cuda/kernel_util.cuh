// Shared pieces of the project's CUDA kernels: launch shapes, grid-stride
// loops with 64-bit indices, tensors' storage pointers, checked launches
// and fixed-order block reductions (so results do not depend on
// scheduling: every GPU reduction here is deterministic).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/cuda_device.h"
#include "runtime/execution_context.h"

namespace ddp::cuda {

constexpr int kThreads = 256;

inline cudaStream_t StreamOf(const ExecutionContext& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream()); }

// t's elements as storage type S (float, __nv_bfloat16, __half), for a
// kernel's arguments.
template <typename S>
S* Storage(const Tensor& t) {
  return static_cast<S*>(t.raw_data());
}

// Blocks for `n` elements, one per thread, capped (grid-stride loops cover the rest).
inline unsigned BlocksFor(int64_t n, int64_t cap = 65535 * 8) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < cap ? blocks : cap));
}

#define DDP_GRID_STRIDE(i, n)                                                               \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// After a <<<...>>> launch: fatal with the kernel's name if it failed.
#define DDP_CHECK_LAUNCH(name) ::ddp::cuda::Check(static_cast<int>(cudaGetLastError()), name, __FILE__, __LINE__)

// The sum of `v` over the block, in a fixed order (a shared-memory tree), in
// thread 0. blockDim.x must be kThreads. `shared` holds kThreads values.
template <typename T>
__device__ T BlockSum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

// The maximum over the block, NaN winning (as torch.max), in every thread.
__device__ inline float BlockMax(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = shared[threadIdx.x + stride];
      if (other > shared[threadIdx.x] || other != other) shared[threadIdx.x] = other;
    }
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

}  // namespace ddp::cuda
