#include "runtime/data/sampler.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

namespace ddp {
namespace {

SamplerOptions Options(int64_t n, int64_t world, int64_t rank, int64_t k, int64_t b, bool shuffle) {
  SamplerOptions o;
  o.dataset_size = n;
  o.world_size = world;
  o.rank = rank;
  o.accumulation_steps = k;
  o.batch_size = b;
  o.shuffle = shuffle;
  o.seed = 7;
  return o;
}

TEST(SamplerTest, FileOrderBlocksFollowTheDesign) {
  // world 2, K 2, B 3: G = 12; rank 1's micro-batch 1 of step 1 is block
  // 1 * 2 + 1 = 3 of step 1: samples 12 + 9 .. 12 + 11.
  GlobalBatchSampler s(Options(30, 2, 1, 2, 3, false));
  EXPECT_EQ(s.global_batch(), 12);
  EXPECT_EQ(s.steps_per_epoch(), 2);  // 30 / 12; the last 6 samples are dropped
  EXPECT_EQ(s.MicroBatch(1, 1), (std::vector<int64_t>{21, 22, 23}));
  EXPECT_EQ(s.MicroBatch(0, 0), (std::vector<int64_t>{3, 4, 5}));
  // Step 2 starts epoch 1 from the top.
  EXPECT_EQ(s.MicroBatch(2, 0), (std::vector<int64_t>{3, 4, 5}));
}

TEST(SamplerTest, NRanksCoverWhatOneRankWithNMicroBatchesCovers) {
  const int64_t n = 50, world = 4, b = 2;
  GlobalBatchSampler one(Options(n, 1, 0, world, b, true));
  for (int64_t step = 0; step < 8; ++step) {  // crosses epochs (6 steps each)
    for (int64_t r = 0; r < world; ++r) {
      GlobalBatchSampler rank(Options(n, world, r, 1, b, true));
      EXPECT_EQ(rank.MicroBatch(step, 0), one.MicroBatch(step, r)) << "step " << step << " rank " << r;
    }
  }
}

TEST(SamplerTest, ShuffledEpochsArePermutationsThatDifferPerEpoch) {
  GlobalBatchSampler s(Options(40, 1, 0, 1, 10, true));
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t step = 0; step < 4; ++step) {
    auto m = s.MicroBatch(step, 0);
    epoch0.insert(epoch0.end(), m.begin(), m.end());
    m = s.MicroBatch(step + 4, 0);
    epoch1.insert(epoch1.end(), m.begin(), m.end());
  }
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_EQ(epoch0[i], i);
    EXPECT_EQ(epoch1[i], i);
  }
  EXPECT_EQ(SeededPermutation(40, 7), SeededPermutation(40, 7));
}

TEST(SamplerTest, TwoRanksSeeDisjointSamplesThatTogetherCoverTheEpoch) {
  // 41 samples, 2 ranks x 2 micro-batches x 5: 2 steps of 20 per epoch, one
  // sample dropped; each epoch the ranks' samples are disjoint, and with the
  // dropped one they are the whole set.
  const int64_t n = 41;
  GlobalBatchSampler r0(Options(n, 2, 0, 2, 5, true)), r1(Options(n, 2, 1, 2, 5, true));
  ASSERT_EQ(r0.steps_per_epoch(), 2);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> mine[2];
    for (int64_t step = 2 * epoch; step < 2 * epoch + 2; ++step) {
      EXPECT_EQ(r0.EpochOf(step), epoch);
      for (int64_t micro = 0; micro < 2; ++micro) {
        for (int64_t i : r0.MicroBatch(step, micro)) mine[0].insert(i);
        for (int64_t i : r1.MicroBatch(step, micro)) mine[1].insert(i);
      }
    }
    ASSERT_EQ(mine[0].size(), 20u);
    ASSERT_EQ(mine[1].size(), 20u);
    std::set<int64_t> both = mine[0];
    both.insert(mine[1].begin(), mine[1].end());
    EXPECT_EQ(both.size(), 40u) << "epoch " << epoch << ": the ranks share samples";
    for (int64_t i : both) EXPECT_TRUE(i >= 0 && i < n);
  }
}

TEST(SamplerTest, EndlessDataContinues) {
  GlobalBatchSampler s(Options(-1, 2, 1, 1, 4, true));
  EXPECT_EQ(s.MicroBatch(3, 0), (std::vector<int64_t>{28, 29, 30, 31}));
}

}  // namespace
}  // namespace ddp
