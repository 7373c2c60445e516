// The planner's batch search against peaks given by formula: the largest
// batch is exact, found in about 2 log2(B) probes, every probe's verdict
// matches its figures, and the edges hold (nothing fits, everything fits,
// a peak that jumps).
#include "launch/memory_plan_search.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(MemoryPlanSearchTest, FindsTheLargestBatchOfAnAffinePeak) {
  // 5 GiB of model state plus 180 MiB a sample, 2 GiB overhead, 24 GiB budget:
  // (24 - 2 - 5) GiB / 180 MiB = 96.7 samples.
  const int64_t mib = int64_t{1} << 20, gib = int64_t{1} << 30;
  auto peak = [&](int64_t b) { return 5 * gib + b * 180 * mib; };
  const BatchSearch s = LargestFittingBatch(peak, 24 * gib, 2 * gib, 4096);
  EXPECT_EQ(s.largest_batch, 96);
  EXPECT_LE(s.probes.size(), 2u * 7u + 2u);
  for (const BatchProbe& p : s.probes) {
    EXPECT_EQ(p.peak_bytes, peak(p.batch));
    EXPECT_EQ(p.fits, p.peak_bytes + 2 * gib <= 24 * gib) << p.batch;
  }
}

TEST(MemoryPlanSearchTest, EdgesAndSteps) {
  // Nothing fits: the model state alone passes the budget.
  EXPECT_EQ(LargestFittingBatch([](int64_t b) { return 100 + b; }, 50, 0, 64).largest_batch, 0);
  // Everything up to the limit fits.
  const BatchSearch all = LargestFittingBatch([](int64_t b) { return b; }, 1000, 0, 37);
  EXPECT_EQ(all.largest_batch, 37);
  EXPECT_EQ(all.probes.back().batch, 37);
  // A peak that steps up at 13 (a workspace that grows past a size class).
  EXPECT_EQ(LargestFittingBatch([](int64_t b) { return b < 13 ? 10 * b : 10 * b + 500; }, 200, 0, 1000).largest_batch,
            12);
  // Exactly at the budget fits.
  EXPECT_EQ(LargestFittingBatch([](int64_t b) { return 7 * b; }, 70, 0, 1000).largest_batch, 10);
  // From a smallest batch of 2 (batch norm's two values a channel): batch 1
  // is never asked for, and a smallest batch that does not fit is none.
  const BatchSearch from_two = LargestFittingBatch(
      [](int64_t b) {
        EXPECT_GE(b, 2);
        return 7 * b;
      },
      70, 0, 1000, 2);
  EXPECT_EQ(from_two.largest_batch, 10);
  EXPECT_EQ(from_two.probes.front().batch, 2);
  EXPECT_EQ(LargestFittingBatch([](int64_t b) { return 7 * b; }, 10, 0, 1000, 2).largest_batch, 0);
}

}  // namespace
}  // namespace ddp
