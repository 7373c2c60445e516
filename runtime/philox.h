// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): a counter-based generator. Each 128-bit counter under a
// 64-bit key gives four independent 32-bit values, with no state carried
// from one call to the next, so any element's random number is computed
// where it is needed, on the host or on a GPU thread, and is the same on
// both. Dropout masks come from it (see runtime/ops/transformer.h).
#pragma once

#include <cstdint>

#include "runtime/random.h"

namespace ddp {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {

// The round's multipliers and the key's Weyl increments.
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

DDP_HOST_DEVICE inline uint32_t MulHiLo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

}  // namespace philox_detail

// Ten rounds of the Philox4x32 bijection of `counter` under `key`.
DDP_HOST_DEVICE inline Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  using philox_detail::kMul0, philox_detail::kMul1, philox_detail::kWeyl0, philox_detail::kWeyl1;
  Philox4x32 c = counter;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = philox_detail::MulHiLo(kMul0, c.v[0], &hi0);
    const uint32_t lo1 = philox_detail::MulHiLo(kMul1, c.v[2], &hi1);
    c = Philox4x32{{hi1 ^ c.v[1] ^ key0, lo1, hi0 ^ c.v[3] ^ key1, lo0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return c;
}

// A 32-bit draw as a float in [0, 1): its top 24 bits over 2^24, exact in
// float on every device.
DDP_HOST_DEVICE inline float UniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

}  // namespace ddp
