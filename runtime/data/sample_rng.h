// Random draws for one sample of one epoch: Philox4x32-10 keyed by the seed
// and a stream (what the draws are for: crops, masks), counting over
// (epoch, sample index, draw). Stateless across samples, so whichever rank
// or thread makes a sample makes the same one.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/philox.h"

namespace ddp {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index) {
    const uint64_t key = seed ^ stream;
    key_[0] = static_cast<uint32_t>(key);
    key_[1] = static_cast<uint32_t>(key >> 32);
    counter_[0] = 0;
    counter_[1] = static_cast<uint32_t>(epoch);
    counter_[2] = static_cast<uint32_t>(index);
    counter_[3] = static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32);
  }
  // Uniform in [0, 1), 32 bits.
  double Uniform() {
    if (used_ == 4) {
      const Philox4x32 out =
          Philox4x32_10(Philox4x32{{counter_[0], counter_[1], counter_[2], counter_[3]}}, key_[0], key_[1]);
      for (int i = 0; i < 4; ++i) block_[i] = out.v[i];
      ++counter_[0];
      used_ = 0;
    }
    return block_[used_++] * (1.0 / 4294967296.0);
  }
  // Uniform integer in [0, n), n > 0.
  int64_t Below(int64_t n) {
    return std::min<int64_t>(static_cast<int64_t>(Uniform() * static_cast<double>(n)), n - 1);
  }

 private:
  uint32_t key_[2];
  uint32_t counter_[4];
  uint32_t block_[4];
  int used_ = 4;
};

// Streams of draws.
inline constexpr uint64_t kAugmentStream = 0x6175676d656e7473ull;  // "augments"
inline constexpr uint64_t kPretrainingStream = 0x707265747261696eull;  // "pretrain"

}  // namespace ddp
