// The memory planner's search (--plan-memory): the largest per-rank batch
// whose step peak, plus the device's fixed overhead, fits a budget. The
// peak at a batch comes from a meta step (a callback here), and grows with
// the batch, so the search doubles until a batch does not fit, then
// bisects: about 2 log2(B) meta steps for a largest batch B.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ddp {

struct BatchProbe {
  int64_t batch = 0;
  int64_t peak_bytes = 0;  // the step's allocator peak at that batch
  bool fits = false;       // peak + overhead <= budget
  // An activation past 2^31 - 1 elements at this batch: no peak measured
  // (peak_bytes is a stand-in larger than any budget).
  bool past_bound = false;
};

struct BatchSearch {
  // 0 when not even the smallest batch fits.
  int64_t largest_batch = 0;
  // Every batch measured, in the order measured.
  std::vector<BatchProbe> probes;
};

// The largest batch in [smallest, limit] with peak_at(batch) + overhead <=
// budget, peak_at non-decreasing in the batch. (A model may refuse the
// smallest batches: batch norm wants two values a channel.)
BatchSearch LargestFittingBatch(const std::function<int64_t(int64_t)>& peak_at, int64_t budget, int64_t overhead,
                                int64_t limit, int64_t smallest = 1);

}  // namespace ddp
