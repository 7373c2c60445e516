// One rank's timeline written and read back: the process and track names,
// a host event and each bucket's collective on the start's clock, in
// microseconds, only for the steps asked for.
#include "launch/run_timeline.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/clock.h"
#include "runtime/timeline.h"

namespace ddp {
namespace {

TEST(RunTimelineTest, WritesEveryEventOnTheStartsClock) {
  const std::string path = std::string(::testing::TempDir()) + "/timeline.json";
  RunTimeline timeline({path, 2, 3, /*rank=*/0, /*world_size=*/1});
  ASSERT_TRUE(timeline.enabled());
  ASSERT_TRUE(timeline.Start(nullptr, ExecutionContext::Cpu(1)).ok());
  const double zero = SteadySeconds();
  Timeline& t = Timeline::Get();
  t.SetStep(1, false);  // before --timeline-steps: not recorded
  t.Add("forward", "compute", Timeline::kComputeTrack, zero + 0.5, 0.25);
  t.SetStep(2, true);
  t.Add("forward", "compute", Timeline::kComputeTrack, zero + 1.0, 0.25);
  ReduceStats stats;
  stats.backward_start = zero + 2.0;
  stats.buckets = {{0.010, 0.030, 0.0}, {0.020, -1.0, 0.0}};  // the second never seen finishing
  RunTimeline::AddBucketEvents(stats, "reduce-scatter");
  ASSERT_TRUE(timeline.Write(nullptr, 3).ok());

  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["otherData"]["steps"], "2:3");
  EXPECT_EQ(j["otherData"]["clock_offsets_s"], nlohmann::json::array({0.0}));
  std::vector<nlohmann::json> spans;
  std::vector<std::string> names;
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] == "M") names.push_back(e["args"]["name"]);
    if (e["ph"] == "X") spans.push_back(e);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"rank 0", "compute", "communication", "input"}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["name"], "forward");
  EXPECT_EQ(spans[0]["args"]["step"], 2);
  EXPECT_EQ(spans[0]["dur"].get<double>(), 0.25e6);
  EXPECT_EQ(spans[1]["name"], "reduce-scatter bucket 0");
  EXPECT_EQ(spans[1]["tid"], Timeline::kCommTrack);
  EXPECT_NEAR(spans[1]["dur"].get<double>(), 20000.0, 1e-6);
  // On the start's clock: 1 s and 2.01 s after `zero`, which came a little
  // after the start.
  const double forward_us = spans[0]["ts"].get<double>(), bucket_us = spans[1]["ts"].get<double>();
  EXPECT_GE(forward_us, 1.0e6);
  EXPECT_LT(forward_us, 1.0e6 + 0.5e6);
  EXPECT_NEAR(bucket_us - forward_us, 1.01e6, 1e-3);
}

}  // namespace
}  // namespace ddp
