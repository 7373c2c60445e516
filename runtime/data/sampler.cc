#include "runtime/data/sampler.h"

#include <limits>
#include <numeric>

#include <glog/logging.h>

#include "runtime/random.h"

namespace ddp {
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased enough for any dataset size here: 64-bit draws modulo i + 1.
    const int64_t j = static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
    state += kSplitMix64Increment;
    std::swap(p[i], p[j]);
  }
  return p;
}

GlobalBatchSampler::GlobalBatchSampler(const SamplerOptions& options) : options_(options) {
  CHECK(options.world_size > 0 && options.rank >= 0 && options.rank < options.world_size &&
        options.accumulation_steps > 0 && options.batch_size > 0)
      << "sampler options";
  global_batch_ = options.world_size * options.accumulation_steps * options.batch_size;
  steps_per_epoch_ = options.dataset_size < 0 ? std::numeric_limits<int64_t>::max()
                                              : options.dataset_size / global_batch_;
}

std::vector<int64_t> GlobalBatchSampler::MicroBatch(int64_t step, int64_t micro) {
  CHECK(micro >= 0 && micro < options_.accumulation_steps) << "micro-batch " << micro;
  CHECK_GT(steps_per_epoch_, 0) << "dataset smaller than one global batch";
  const int64_t epoch = step / steps_per_epoch_;
  const int64_t within = step % steps_per_epoch_;
  const int64_t first = within * global_batch_ + (micro * options_.world_size + options_.rank) * options_.batch_size;
  std::vector<int64_t> indices(options_.batch_size);
  if (options_.dataset_size < 0) {  // endless: sample numbers simply continue
    for (int64_t b = 0; b < options_.batch_size; ++b) indices[b] = step * global_batch_ + (first - within * global_batch_) + b;
    return indices;
  }
  if (options_.shuffle && epoch != permuted_epoch_) {
    permutation_ = SeededPermutation(options_.dataset_size, options_.seed + static_cast<uint64_t>(epoch));
    permuted_epoch_ = epoch;
  }
  for (int64_t b = 0; b < options_.batch_size; ++b) {
    indices[b] = options_.shuffle ? permutation_[first + b] : first + b;
  }
  return indices;
}

}  // namespace ddp
