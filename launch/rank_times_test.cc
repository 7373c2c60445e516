// Stragglers: the spread over ranks, the warning's rule worked by hand, and
// one rank's gather without a communicator.
#include "launch/rank_times.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(RankTimesTest, SpreadSkipsUnknownRanks) {
  const nlohmann::ordered_json s = Spread({0.30, -1.0, 0.10, 0.20});
  EXPECT_EQ(s["min"].get<double>(), 0.10);
  EXPECT_EQ(s["median"].get<double>(), 0.20);  // of the three known
  EXPECT_EQ(s["max"].get<double>(), 0.30);
  EXPECT_EQ(s["slowest_rank"].get<int>(), 0);
  EXPECT_EQ(s["by_rank"].size(), 4u);
  EXPECT_EQ(s.dump(), R"({"min":0.1,"median":0.2,"max":0.3,"slowest_rank":0,"by_rank":[0.3,-1.0,0.1,0.2]})");
  const nlohmann::ordered_json none = Spread({-1.0, -1.0});
  EXPECT_EQ(none["max"].get<double>(), -1.0);
  EXPECT_EQ(none["slowest_rank"].get<int>(), -1);
}

RankTimes Times(std::vector<double> compute, std::vector<double> quarter, int64_t samples) {
  RankTimes t;
  t.compute = std::move(compute);
  t.compute_quarter = std::move(quarter);
  t.wait.assign(t.compute.size(), 0.0);
  t.samples = samples;
  return t;
}

TEST(RankTimesTest, ARankWellAboveTheOthersIsNamed) {
  // Rank 2: median 0.150 s against the others' 0.100 s (+50%), and its
  // quarter point 0.140 s above 0.100 s too.
  const std::vector<std::string> lines = StragglerWarnings(Times({0.100, 0.100, 0.150}, {0.09, 0.09, 0.140}, 10));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "ddp_train: warning: rank 2 is a straggler: its median compute time, 0.150 s a step, is 50% above the "
            "other ranks' 0.100 s, and in synchronous data parallelism every rank waits for it (look at that GPU's "
            "clocks, temperature and PCIe link, or at its node's load)");
}

TEST(RankTimesTest, NoStragglerBelowTheBarsOrTooEarly) {
  EXPECT_TRUE(StragglerWarnings(Times({0.100, 0.109}, {0.09, 0.105}, 10)).empty());  // +9%: below 10%
  EXPECT_TRUE(StragglerWarnings(Times({0.100, 0.150}, {0.09, 0.095}, 10)).empty());  // a noisy stretch only
  EXPECT_TRUE(StragglerWarnings(Times({0.100, 0.150}, {0.09, 0.140}, 4)).empty());   // under 5 timed steps
  EXPECT_TRUE(StragglerWarnings(Times({0.150}, {0.140}, 10)).empty());               // one rank
  EXPECT_EQ(StragglerWarnings(Times({0.100, 0.150}, {0.09, 0.140}, 5)).size(), 1u);
}

TEST(RankTimesTest, OneRankGathersItsOwnMedians) {
  StatusOr<RankTimes> t = GatherRankTimes(nullptr, {0.4, 0.1, 0.3, 0.2, 0.5}, {0.02, -1.0, 0.04});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->compute.size(), 1u);
  EXPECT_EQ(t->compute[0], 0.3);
  EXPECT_EQ(t->wait[0], 0.03);  // the known two's mean
  EXPECT_EQ(t->compute_quarter[0], 0.2);
  EXPECT_EQ(t->samples, 5);
}

}  // namespace
}  // namespace ddp
