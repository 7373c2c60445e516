// SplitMix64: the counter-based mixer behind synthetic data, shuffling and
// the portable test generator. Stateless, so sample i needs no sample before
// it, and simple enough that Python reproduces it bit for bit.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

namespace ddp {

constexpr uint64_t kSplitMix64Increment = 0x9e3779b97f4a7c15ull;

// The SplitMix64 output for state `z` (the state before its increment).
// Host and device alike (synthetic data is generated on GPUs too).
DDP_HOST_DEVICE inline uint64_t SplitMix64(uint64_t z) {
  z += kSplitMix64Increment;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ddp
