// Which samples each rank's micro-batches take (DESIGN.md "Sample order"):
// an epoch's order is the file order, or a permutation seeded by
// seed + epoch that every rank computes alike; global step s consumes the
// next G = world * K * B samples, micro-batch j of rank r takes block
// j * world + r of B consecutive samples, and a final partial global batch
// is dropped. This mapping is what makes N ranks equal one rank with N
// accumulated micro-batches.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp {

struct SamplerOptions {
  int64_t dataset_size = 0;  // ImageDataset::kEndless for generated data
  int64_t world_size = 1, rank = 0;
  int64_t accumulation_steps = 1, batch_size = 1;
  bool shuffle = true;
  uint64_t seed = 1;
};

class GlobalBatchSampler {
 public:
  explicit GlobalBatchSampler(const SamplerOptions& options);

  int64_t global_batch() const { return global_batch_; }
  // Whole global batches per epoch (INT64_MAX for endless data).
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // Sample indices of micro-batch `micro` of global step `step` (0-based,
  // counted across epochs) for this rank.
  std::vector<int64_t> MicroBatch(int64_t step, int64_t micro);
  // The epoch global step `step` belongs to (0 for endless data), which
  // keys random augmentation.
  int64_t EpochOf(int64_t step) const { return step / steps_per_epoch_; }

 private:
  SamplerOptions options_;
  int64_t global_batch_;
  int64_t steps_per_epoch_;
  int64_t permuted_epoch_ = -1;
  std::vector<int64_t> permutation_;
};

// Fisher-Yates with SplitMix64 draws: the same permutation on every platform.
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

}  // namespace ddp
