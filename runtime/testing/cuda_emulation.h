// Runs CUDA kernels' f32 paths on the CPU, for tests on machines without a
// GPU: each thread of a block is a std::thread, blocks run one after
// another, and __syncthreads, __syncwarp and __shfl_xor_sync are barriers
// over the block's or the warp's threads. Kernels compiled by the host
// compiler this way see threadIdx, blockIdx and blockDim, and one block's
// dynamic shared memory in `kernel_namespace::smem` (the test defines it;
// see DDP_EMULATED_SHARED_MEMORY). Tensor-core code (WMMA) is not
// emulated: kernels keep it under #ifdef __CUDACC__.
//
// Include this before the kernels' header and before anything that
// includes cuda_runtime.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

// The CUDA qualifiers mean nothing on the host.
#undef __global__
#undef __device__
#undef __shared__
#undef __launch_bounds__
#undef __forceinline__
#define __global__
#define __device__
#define __shared__
#define __launch_bounds__(...)
#define __forceinline__ inline

namespace ddp::testing::emulation {

// A reusable barrier for `count` threads.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  const int count_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

// The block being run: its barriers and the warps' exchange slots.
struct Block {
  explicit Block(int threads) : block(threads), exchange(static_cast<size_t>(threads)) {
    for (int w = 0; w < (threads + 31) / 32; ++w) warps.emplace_back(new Barrier(32));
  }
  ~Block() {
    for (Barrier* b : warps) delete b;
  }
  Barrier block;
  std::vector<Barrier*> warps;
  std::vector<uint64_t> exchange;
};

inline thread_local uint3 thread_index;
inline thread_local uint3 block_index;
inline dim3 block_dim;
inline Block* current = nullptr;

// Runs kernel(args...) over `grid` blocks of `threads` threads (a multiple
// of 32), one block at a time.
template <typename Kernel, typename... Args>
void Launch(dim3 grid, int threads, Kernel kernel, Args... args) {
  block_dim = dim3(static_cast<unsigned>(threads), 1, 1);
  for (unsigned y = 0; y < grid.y; ++y) {
    for (unsigned x = 0; x < grid.x; ++x) {
      Block block(threads);
      current = &block;
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          thread_index = make_uint3(static_cast<unsigned>(t), 0, 0);
          block_index = make_uint3(x, y, 0);
          kernel(args...);
        });
      }
      for (std::thread& t : pool) t.join();
      current = nullptr;
    }
  }
}

inline void SyncWarp() { current->warps[thread_index.x / 32]->Wait(); }

// The value `v` of lane (this lane ^ mask), as __shfl_xor_sync gives it.
template <typename T>
T ShflXor(T v, int mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "one word a lane");
  uint64_t word = 0;
  std::memcpy(&word, &v, sizeof(T));
  current->exchange[thread_index.x] = word;
  SyncWarp();
  const uint64_t other = current->exchange[thread_index.x ^ static_cast<unsigned>(mask)];
  SyncWarp();
  T out;
  std::memcpy(&out, &other, sizeof(T));
  return out;
}

}  // namespace ddp::testing::emulation

#define threadIdx (::ddp::testing::emulation::thread_index)
#define blockIdx (::ddp::testing::emulation::block_index)
#define blockDim (::ddp::testing::emulation::block_dim)

inline void __syncthreads() { ::ddp::testing::emulation::current->block.Wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::ddp::testing::emulation::SyncWarp(); }
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return ::ddp::testing::emulation::ShflXor(v, mask);
}

// Defines the shared memory a kernel in namespace `ns` declares as
// `extern __shared__ unsigned char smem[]`, `bytes` long.
#define DDP_EMULATED_SHARED_MEMORY(ns, bytes) \
  namespace ns {                              \
  alignas(128) unsigned char smem[bytes];     \
  }
