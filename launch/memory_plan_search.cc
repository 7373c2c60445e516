#include "launch/memory_plan_search.h"

#include <algorithm>

#include <glog/logging.h>

namespace ddp {

BatchSearch LargestFittingBatch(const std::function<int64_t(int64_t)>& peak_at, int64_t budget, int64_t overhead,
                                int64_t limit, int64_t smallest) {
  CHECK(smallest >= 1 && limit >= smallest) << "batch search from " << smallest << " up to " << limit;
  BatchSearch search;
  auto fits = [&](int64_t batch) {
    BatchProbe probe{batch, peak_at(batch), false};
    probe.fits = probe.peak_bytes + overhead <= budget;
    search.probes.push_back(probe);
    return probe.fits;
  };
  // Doubling: `good` fits, `bad` does not (limit + 1 stands for "none seen").
  int64_t good = smallest - 1, bad = limit + 1;
  for (int64_t batch = smallest; batch <= limit; batch = std::min(limit, batch * 2)) {
    if (!fits(batch)) {
      bad = batch;
      break;
    }
    good = batch;
    if (batch == limit) break;
  }
  // Bisection between them.
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (fits(mid)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  search.largest_batch = good >= smallest ? good : 0;
  return search;
}

}  // namespace ddp
