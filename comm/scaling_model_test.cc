// The scaling model's arithmetic, against hand-computed steps; its link
// files, profiles and fit; and its bucket rule against the reducer's.
#include "comm/scaling_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "comm/buckets.h"
#include "models/registry.h"

namespace ddp {
namespace {

Link TestLink(double gbps, double latency_us, bool cpu = false, double slowdown = 0.0) {
  Link l;
  l.name = "test";
  l.bus_gbps = gbps;
  l.latency_us = latency_us;
  l.shares_compute = cpu;
  l.compute_slowdown = slowdown;
  return l;
}

ClusterShape Shape(int gpus, const Link& link, int nodes = 1, const Link& inter = Link()) {
  ClusterShape s;
  s.gpus_per_node = gpus;
  s.nodes = nodes;
  s.intra = link;
  s.inter = inter;
  return s;
}

// Three 1 MB gradients ready 0.1 s apart in a 0.3 s backward, after a
// 0.1 s forward; 0.05 s of other work. With --bucket-mb 0.5 each is a
// bucket of its own.
StepProfile ThreeParams() {
  StepProfile p;
  p.model = "toy";
  p.device = "cpu";
  p.samples_per_step = 8;
  p.forward_s = 0.1;
  p.backward_s = p.last_backward_s = 0.3;
  p.other_s = 0.05;
  p.step_s = 0.45;
  p.params = {{"c", 1000000, 0.1}, {"b", 1000000, 0.2}, {"a", 1000000, 0.3}};
  return p;
}

PredictOptions Buckets(double mb, bool overlap = true) {
  PredictOptions o;
  o.bucket_mb = o.first_bucket_mb = mb;
  o.overlap = overlap;
  return o;
}

TEST(ScalingModelTest, RingTimesFollowNcclTestsBusBandwidth) {
  // 4 ranks at 10 GB/s, 10 us a hop: 6 hops of latency + 1.5 x 100 MB / 10 GB/s.
  const ClusterShape four = Shape(4, TestLink(10.0, 10.0));
  EXPECT_NEAR(AllReduceSeconds(100000000, four), 6 * 10e-6 + 1.5 * 0.01, 1e-12);
  EXPECT_NEAR(ReduceScatterSeconds(100000000, four), 3 * 10e-6 + 0.75 * 0.01, 1e-12);
  EXPECT_EQ(AllReduceSeconds(100000000, Shape(1, TestLink(10.0, 10.0))), 0.0);
  // Two nodes: the ring's slowest hop sets both terms.
  const ClusterShape two_nodes = Shape(4, TestLink(10.0, 10.0), 2, TestLink(2.5, 30.0));
  EXPECT_NEAR(AllReduceSeconds(80000000, two_nodes), 14 * 30e-6 + 2.0 * 7 / 8 * 80000000 / 2.5e9, 1e-12);
}

TEST(ScalingModelTest, OverlapHidesAllButTheLastBucket) {
  // Each 1 MB all-reduce at 2 ranks and 20 MB/s (no latency): 0.05 s, less
  // than the 0.1 s between gradients, so only the last is exposed.
  const Prediction p = Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0)), Buckets(1.0));
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_NEAR(p.buckets[0].start_s, 0.1, 1e-12);
  EXPECT_NEAR(p.buckets[2].end_s, 0.35, 1e-12);
  EXPECT_NEAR(p.comm_s, 0.15, 1e-9);
  EXPECT_NEAR(p.step_s, 0.1 + 0.35 + 0.05 + AllReduceSeconds(72, Shape(2, TestLink(0.02, 0.0))), 1e-9);
  EXPECT_NEAR(p.efficiency, 0.45 / p.step_s, 1e-12);
  EXPECT_NEAR(p.samples_per_s, 2 * 8 / p.step_s, 1e-9);
}

TEST(ScalingModelTest, CollectivesQueueBehindEachOther) {
  // 0.15 s each: 0.1-0.25, 0.25-0.40, 0.40-0.55; backward ends at 0.3.
  const Prediction p = Predict(ThreeParams(), Shape(2, TestLink(1.0 / 150, 0.0)), Buckets(1.0));
  EXPECT_NEAR(p.buckets[1].start_s, 0.25, 1e-9);
  EXPECT_NEAR(p.buckets[2].end_s, 0.55, 1e-9);
  EXPECT_NEAR(p.step_s - p.exposed_s, 0.45, 1e-9);
  EXPECT_GT(p.exposed_s, 0.25 - 1e-9);
}

TEST(ScalingModelTest, WithoutOverlapEveryCollectiveWaitsForBackward) {
  const Prediction p = Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0)), Buckets(1.0, /*overlap=*/false));
  EXPECT_NEAR(p.buckets[0].start_s, 0.3, 1e-12);
  EXPECT_NEAR(p.buckets[2].end_s, 0.45, 1e-12);
  // One bucket of everything: the same bytes, the same time.
  const Prediction one = Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0)), Buckets(100, false));
  ASSERT_EQ(one.buckets.size(), 1u);
  EXPECT_NEAR(one.buckets[0].end_s, 0.45, 1e-12);
  // fp16 gradients halve the bytes.
  PredictOptions half = Buckets(100, false);
  half.wire_scale = 0.5;
  EXPECT_NEAR(Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0)), half).buckets[0].end_s, 0.375, 1e-12);
}

TEST(ScalingModelTest, CpuRanksComputeSlowerWhileACollectiveRuns) {
  // Slowdown 1: compute at half speed while the first bucket's 0.05 s
  // all-reduce runs (0.1-0.15: 0.025 s of compute done), so the second
  // gradient is ready at 0.225; its all-reduce (0.225-0.275) halves compute
  // again, so the third, the last, is ready at 0.35, and its all-reduce
  // ends at 0.40.
  const Prediction p = Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0, true, 1.0)), Buckets(1.0));
  EXPECT_NEAR(p.buckets[1].ready_s, 0.225, 1e-9);
  EXPECT_NEAR(p.buckets[2].ready_s, 0.35, 1e-9);
  EXPECT_NEAR(p.buckets[2].end_s, 0.40, 1e-9);
  EXPECT_NEAR(p.step_s - p.compute_s, 0.05 + 0.05 + AllReduceSeconds(72, Shape(2, TestLink(0.02, 0.0))), 1e-9);
  // Collectives twice as slow while compute runs: the first (0.1-0.2) and
  // second (0.2-0.3) overlap compute; the third runs alone (0.3-0.35).
  Link slow_comm = TestLink(0.02, 0.0, true, 0.0);
  slow_comm.comm_slowdown = 1.0;
  const Prediction q = Predict(ThreeParams(), Shape(2, slow_comm), Buckets(1.0));
  EXPECT_NEAR(q.buckets[0].end_s, 0.2, 1e-9);
  EXPECT_NEAR(q.buckets[1].end_s, 0.3, 1e-9);
  EXPECT_NEAR(q.buckets[2].end_s, 0.35, 1e-9);
  EXPECT_NE(DescribeCase(Shape(2, TestLink(0.02, 0.0, true, 1.0))).find("CPU ranks"), std::string::npos);
  EXPECT_NE(DescribeCase(Shape(2, TestLink(0.02, 0.0))).find("GPU ranks"), std::string::npos);
}

TEST(ScalingModelTest, CpuRanksPayEachCollectivesFixedCostBesideCompute) {
  // 20 ms of compute and 10 ms of the collective's own for each collective
  // started while backward runs: the first (at 0.1) sets compute back to
  // 0.08 and runs 0.06 s (to 0.16); compute reaches the second gradient at
  // 0.22; that one's collective sets it back to 0.18 and runs to 0.28;
  // backward ends at 0.34, and the third collective, started after it, pays
  // nothing extra (0.34-0.39).
  Link fixed = TestLink(0.02, 0.0, true, 0.0);
  fixed.compute_per_collective_ms = 20.0;
  fixed.comm_per_collective_ms = 10.0;
  const ClusterShape shape = Shape(2, fixed);
  const Prediction p = Predict(ThreeParams(), shape, Buckets(1.0));
  EXPECT_NEAR(p.buckets[0].end_s, 0.16, 1e-9);
  EXPECT_NEAR(p.buckets[1].ready_s, 0.22, 1e-9);
  EXPECT_NEAR(p.buckets[1].end_s, 0.28, 1e-9);
  EXPECT_NEAR(p.buckets[2].ready_s, 0.34, 1e-9);
  EXPECT_NEAR(p.buckets[2].end_s, 0.39, 1e-9);
  EXPECT_NEAR(p.step_s - p.compute_s, 0.09 + AllReduceSeconds(72, shape), 1e-9);
  // Without overlap no collective starts beside compute: no fixed cost.
  const Prediction q = Predict(ThreeParams(), shape, Buckets(1.0, /*overlap=*/false));
  EXPECT_NEAR(q.buckets[2].end_s, 0.3 + 3 * 0.05, 1e-9);
  EXPECT_NE(DescribeCase(shape).find("costs it 20.0 ms and itself 10.0 ms more"), std::string::npos)
      << DescribeCase(shape);
}

TEST(ScalingModelTest, CpuRanksComputeAtFullSpeedWhileACollectiveWaitsItsFixedCost) {
  // Compute half as fast while bytes move, and each collective started
  // beside compute waits 10 ms first, compute at full speed: the first
  // bucket's collective waits 0.10-0.11 (compute to 0.11) and moves bytes
  // 0.11-0.16 (compute to 0.135), compute reaches the second gradient at
  // 0.225; its collective waits to 0.235 (0.21), moves to 0.285 (0.235),
  // and backward ends at 0.35; the third, after backward, pays no wait
  // (0.35-0.40).
  Link link = TestLink(0.02, 0.0, true, 1.0);
  link.comm_per_collective_ms = 10.0;
  const Prediction p = Predict(ThreeParams(), Shape(2, link), Buckets(1.0));
  EXPECT_NEAR(p.buckets[0].end_s, 0.16, 1e-9);
  EXPECT_NEAR(p.buckets[1].ready_s, 0.225, 1e-9);
  EXPECT_NEAR(p.buckets[1].end_s, 0.285, 1e-9);
  EXPECT_NEAR(p.buckets[2].ready_s, 0.35, 1e-9);
  EXPECT_NEAR(p.buckets[2].end_s, 0.40, 1e-9);
}

// A load as the model has it: backward beside `collectives` collectives of
// `quiet` s each, back to back, compute slowed by s while their bytes move
// and each first waiting y at full speed and costing compute x.
ContentionLoad Load(int64_t bytes, double backward_quiet, double collectives, double quiet, double s, double c,
                    double x, double y) {
  const double sigma = s / (1.0 + s);
  // T = q + n x + (T - n y) sigma.
  const double backward = (backward_quiet + collectives * x - collectives * y * sigma) / (1.0 - sigma);
  return ContentionLoad{bytes, backward, collectives, quiet, quiet * (1.0 + c) + y};
}

TEST(ScalingModelTest, ContentionFitSeparatesFixedCostsFromSlowdowns) {
  // Backward 0.2 s alone; compute 50% slower while bytes move and 10 ms a
  // collective; collectives 30% slower and 5 ms more each. 16 MiB loads: 5
  // collectives in a backward, 40 ms each alone; 4 MiB: 17, 10 ms alone.
  const ContentionLoad large = Load(16 << 20, 0.2, 5.0, 0.04, 0.5, 0.3, 0.01, 0.005);
  const ContentionLoad small = Load(4 << 20, 0.2, 17.0, 0.01, 0.5, 0.3, 0.01, 0.005);
  EXPECT_NEAR(large.backward_s, (0.25 - 0.025 / 3) * 1.5, 1e-12);  // the algebra above, by hand
  Contention k = FitContention(0.2, large, &small);
  EXPECT_NEAR(k.compute_slowdown, 0.5, 1e-9);
  EXPECT_NEAR(k.compute_per_collective_s, 0.01, 1e-9);
  EXPECT_NEAR(k.comm_slowdown, 0.3, 1e-9);
  EXPECT_NEAR(k.comm_per_collective_s, 0.005, 1e-9);
  // One size: its ratios, no fixed cost (so all of the loaded backward
  // moves bytes).
  k = FitContention(0.2, large, nullptr);
  EXPECT_NEAR(k.compute_slowdown, large.backward_s / 0.2 - 1.0, 1e-9);
  EXPECT_NEAR(k.comm_slowdown, 0.057 / 0.04 - 1.0, 1e-9);
  EXPECT_EQ(k.compute_per_collective_s, 0.0);
  EXPECT_EQ(k.comm_per_collective_s, 0.0);
  // The smaller load's backward faster than its fewer bytes explain
  // (noise): no compute fixed cost, the larger load's slowdown over the
  // time it moved bytes. A fixed cost larger than the whole excess: the
  // slowdown zero and the larger load's excess spread over its collectives.
  ContentionLoad quick = small;
  quick.backward_s = 0.21;
  k = FitContention(0.2, large, &quick);
  EXPECT_EQ(k.compute_per_collective_s, 0.0);
  const double moved = large.backward_s - 5 * 0.005, sigma = (large.backward_s - 0.2) / moved;
  EXPECT_NEAR(k.compute_slowdown, sigma / (1.0 - sigma), 1e-9);
  ContentionLoad steep = small;
  steep.backward_s = large.backward_s + 12 * 0.05;  // 50 ms a collective
  k = FitContention(0.2, large, &steep);
  EXPECT_EQ(k.compute_slowdown, 0.0);
  EXPECT_NEAR(k.compute_per_collective_s, (large.backward_s - 0.2) / 5, 1e-9);
  // Compute all but stopped while bytes move: the slowdown at its cap.
  ContentionLoad stalled = Load(16 << 20, 0.2, 5.0, 0.04, 100.0, 0.0, 0.0, 0.0);
  k = FitContention(0.2, stalled, nullptr);
  EXPECT_NEAR(k.compute_slowdown, 19.0, 1e-9);
  // Collectives: a line through both sizes below zero at no bytes: no
  // fixed cost, the larger one's ratio.
  ContentionLoad proportional = small;
  proportional.collective_loaded_s = 0.01 * 1.1;
  k = FitContention(0.2, large, &proportional);
  EXPECT_EQ(k.comm_per_collective_s, 0.0);
  EXPECT_NEAR(k.comm_slowdown, 0.057 / 0.04 - 1.0, 1e-9);
  // Quiet times less than twofold apart (both mostly latency), loaded ones
  // 18 and 15 ms: a slope between them would be noise (23); no slowdown,
  // the mean excess fixed.
  ContentionLoad fast_large{1 << 20, 0.2, 3.0, 0.0005, 0.018}, fast_small{1 << 18, 0.2, 3.0, 0.0004, 0.015};
  k = FitContention(0.2, fast_large, &fast_small);
  EXPECT_EQ(k.comm_slowdown, 0.0);
  EXPECT_NEAR(k.comm_per_collective_s, (0.0175 + 0.0146) / 2, 1e-12);
  // A slope below one: no slowdown, the mean excess fixed.
  ContentionLoad flat = small;
  flat.collective_loaded_s = 0.05;
  k = FitContention(0.2, large, &flat);
  EXPECT_EQ(k.comm_slowdown, 0.0);
  EXPECT_NEAR(k.comm_per_collective_s, (0.017 + 0.04) / 2, 1e-12);
  // Nothing timed alone: no contention, not a division by zero.
  k = FitContention(0.0, large, &small);
  EXPECT_EQ(k.compute_slowdown, 0.0);
  EXPECT_EQ(k.comm_slowdown, 0.0);
}

TEST(ScalingModelTest, ContentionProbeFilesAreFittedAnew) {
  const ContentionLoad large = Load(16 << 20, 0.2, 5.0, 0.04, 0.5, 0.3, 0.01, 0.005);
  const ContentionLoad small = Load(4 << 20, 0.2, 17.0, 0.01, 0.5, 0.3, 0.01, 0.005);
  auto load = [](const ContentionLoad& l) {
    char text[300];
    std::snprintf(text, sizeof(text),
                  "{\"bytes\": %lld, \"backward_s\": %.17g, \"collectives_per_backward\": %.17g, "
                  "\"collective_quiet_s\": %.17g, \"collective_loaded_s\": %.17g}",
                  static_cast<long long>(l.bytes), l.backward_s, l.collectives, l.collective_quiet_s,
                  l.collective_loaded_s);
    return std::string(text);
  };
  // The figures the probe printed (here nonsense) are not what the link takes.
  const std::string head = "{\"format\": \"ddp_train contention probe 2\", \"compute_quiet_s\": 0.2, "
                           "\"compute_slowdown\": 9, \"large\": " + load(large);
  StatusOr<Contention> both = FitContentionProbe(head + ", \"small\": " + load(small) + "}", "probe.json");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_NEAR(both->compute_slowdown, 0.5, 1e-9);
  EXPECT_NEAR(both->compute_per_collective_s, 0.01, 1e-9);
  EXPECT_NEAR(both->comm_slowdown, 0.3, 1e-9);
  EXPECT_NEAR(both->comm_per_collective_s, 0.005, 1e-9);
  StatusOr<Contention> one = FitContentionProbe(head + "}", "probe.json");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_NEAR(one->compute_slowdown, large.backward_s / 0.2 - 1.0, 1e-9);
  EXPECT_EQ(one->comm_per_collective_s, 0.0);
  StatusOr<Contention> foreign = FitContentionProbe("{\"format\": \"ddp_train step profile 1\"}", "p.json");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("p.json"), std::string::npos);
  StatusOr<Contention> partial = FitContentionProbe(head + ", \"small\": {\"bytes\": 4}}", "q.json");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("q.json"), std::string::npos);
}

TEST(ScalingModelTest, ZeroGathersUnderTheNextForward) {
  // Reduce-scatters of 0.025 s each hide; the 3 x 0.025 s all-gather is
  // hidden by the 0.1 s forward.
  PredictOptions zero = Buckets(1.0);
  zero.zero_stage = 2;
  const ClusterShape shape = Shape(2, TestLink(0.02, 0.0));
  const Prediction p = Predict(ThreeParams(), shape, zero);
  EXPECT_NEAR(p.buckets[2].end_s, 0.325, 1e-9);
  EXPECT_NEAR(p.step_s, 0.1 + 0.325 + 0.05 + AllReduceSeconds(72, shape), 1e-9);
  // Slower links: the gather's excess over the forward shows.
  const ClusterShape slow = Shape(2, TestLink(0.005, 0.0));
  const Prediction q = Predict(ThreeParams(), slow, zero);
  EXPECT_NEAR(q.comm_s, 6 * 0.1, 1e-9);
  EXPECT_NEAR(q.step_s, 0.1 + (0.1 + 3 * 0.1) + 0.05 + AllReduceSeconds(72, slow) + (0.3 - 0.1), 1e-9);
}

TEST(ScalingModelTest, ZeroThreeGathersAgainUnderBackward) {
  // Stage 3 all-gathers the parameters a second time, for backward, on the
  // reduce-scatters' link. Fast: 3 x 0.025 s hide in the 0.3 s backward
  // beside the 0.075 s of reduce-scatters, so the step is stage 2's.
  PredictOptions three = Buckets(1.0), two = Buckets(1.0);
  three.zero_stage = 3;
  two.zero_stage = 2;
  const ClusterShape fast = Shape(2, TestLink(0.02, 0.0));
  EXPECT_NEAR(Predict(ThreeParams(), fast, three).step_s, Predict(ThreeParams(), fast, two).step_s, 1e-12);
  EXPECT_NEAR(Predict(ThreeParams(), fast, three).comm_s, 9 * 0.025, 1e-9);
  // Slow: the reduce-scatters fill the 0.3 s backward, so the second
  // gather's 0.3 s all shows.
  const ClusterShape slow = Shape(2, TestLink(0.005, 0.0));
  EXPECT_NEAR(Predict(ThreeParams(), slow, three).comm_s, 9 * 0.1, 1e-9);
  EXPECT_NEAR(Predict(ThreeParams(), slow, three).step_s, Predict(ThreeParams(), slow, two).step_s + 0.3, 1e-9);
}

TEST(ScalingModelTest, StepsWaitForTheSlowestRank) {
  // E[max] of 2 standard normals is 1/sqrt(pi); of 4, 1.02938.
  StepProfile noisy = ThreeParams();
  noisy.compute_sd_s = 0.1;
  const ClusterShape two = Shape(2, TestLink(0.02, 0.0)), four = Shape(4, TestLink(0.02, 0.0));
  EXPECT_NEAR(Predict(noisy, two, Buckets(1.0)).straggler_s, 0.1 / std::sqrt(M_PI), 1e-5);
  EXPECT_NEAR(Predict(noisy, four, Buckets(1.0)).straggler_s, 0.102938, 1e-5);
  EXPECT_NEAR(Predict(noisy, two, Buckets(1.0)).step_s - Predict(ThreeParams(), two, Buckets(1.0)).step_s,
              0.1 / std::sqrt(M_PI), 1e-5);
  EXPECT_EQ(Predict(noisy, Shape(1, TestLink(0.02, 0.0)), Buckets(1.0)).straggler_s, 0.0);
}

TEST(ScalingModelTest, RanksMeasuredAtOnceWaitForTheSlowest) {
  StepProfile a = ThreeParams(), b = ThreeParams();
  a.step_s = 0.4;
  b.step_s = 0.6;
  StatusOr<StepProfile> ranks = CombineRankProfiles({a, b});
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  EXPECT_EQ(ranks->rank_step_s, (std::vector<double>{0.4, 0.6}));
  EXPECT_DOUBLE_EQ(ranks->step_s, 0.5);
  const ClusterShape two = Shape(2, TestLink(0.02, 0.0));
  // No spread: the slower rank's 0.1 s above the mean, every step.
  ranks->compute_sd_s = 0.0;
  EXPECT_NEAR(Predict(*ranks, two, Buckets(1.0)).straggler_s, 0.1, 1e-12);
  // A spread far below the gap changes next to nothing.
  ranks->compute_sd_s = 0.001;
  EXPECT_NEAR(Predict(*ranks, two, Buckets(1.0)).straggler_s, 0.1, 1e-6);
  // Equal ranks: the expected maximum of two normal draws, 0.1 / sqrt(pi).
  ranks->rank_step_s = {0.5, 0.5};
  ranks->compute_sd_s = 0.1;
  EXPECT_NEAR(Predict(*ranks, two, Buckets(1.0)).straggler_s, 0.1 / std::sqrt(M_PI), 1e-5);
  // A gap of one spread, in closed form (Clark 1961): E[max(X, Y)] of
  // independent N(mx, s^2) and N(my, s^2), my = mx + d, is
  // (mx + my)/2 + d/2 x (2 Phi(d/t) - 1) + t phi(d/t), t = sqrt(2) s.
  ranks->rank_step_s = {0.5, 0.6};
  const double d = 0.1, t = std::sqrt(2.0) * 0.1;
  const double phi = std::exp(-0.5 * (d / t) * (d / t)) / std::sqrt(2.0 * M_PI);
  const double cdf = 0.5 * std::erfc(-(d / t) / std::sqrt(2.0));
  EXPECT_NEAR(Predict(*ranks, two, Buckets(1.0)).straggler_s, d / 2.0 * (2.0 * cdf - 1.0) + t * phi, 1e-5);
  // Predicting another number of ranks than were measured: the spread alone.
  const ClusterShape four = Shape(4, TestLink(0.02, 0.0));
  EXPECT_NEAR(Predict(*ranks, four, Buckets(1.0)).straggler_s, 0.102938, 1e-5);
}

TEST(ScalingModelTest, ComputeScaleScalesEveryComputeTime) {
  PredictOptions o = Buckets(1.0, false);
  o.compute_scale = 0.5;
  const Prediction p = Predict(ThreeParams(), Shape(2, TestLink(0.02, 0.0)), o);
  EXPECT_NEAR(p.compute_s, 0.225, 1e-12);
  EXPECT_NEAR(p.buckets[0].start_s, 0.15, 1e-12);
  EXPECT_NEAR(Predict(ThreeParams(), Shape(1, TestLink(0.02, 0.0)), o).step_s, 0.225, 1e-12);
}

TEST(ScalingModelTest, BucketSpansAreTheReducersLayout) {
  ModelOptions options;
  options.name = "resnet18";
  std::unique_ptr<Model> model = std::move(CreateModel(options)).value();
  std::vector<int64_t> numels;
  for (const Parameter* p : model->BackwardOrder()) numels.push_back(p->value.numel());
  const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
  const std::vector<Parameter*> order = model->BackwardOrder();
  for (double mb : {0.25, 1.0, 5.0, 25.0, 1000.0}) {
    const std::vector<BucketPlan> plans = PlanBuckets(*model, 1.0, mb);
    const std::vector<BucketSpan> spans = PlanBucketSpans(numels, 4, {}, 1.0, mb, 1);
    ASSERT_EQ(plans.size(), spans.size()) << mb;
    for (size_t b = 0; b < spans.size(); ++b) {
      EXPECT_EQ(plans[b].split, spans[b].split) << mb << " " << b;
      EXPECT_EQ(plans[b].params.front(), order[spans[b].first]) << mb << " " << b;
      EXPECT_EQ(plans[b].params.size(), spans[b].count) << mb << " " << b;
      if (spans[b].split) EXPECT_EQ(plans[b].offset, offsets.at(plans[b].params[0]) + spans[b].begin) << mb;
    }
  }
}

TEST(ScalingModelTest, FitRecoversTheLink) {
  const ClusterShape shape = Shape(3, TestLink(1.5, 40.0));
  std::vector<std::pair<int64_t, double>> points;
  for (int64_t bytes = 1 << 18; bytes <= (64 << 20); bytes *= 2) points.push_back({bytes, AllReduceSeconds(bytes, shape)});
  StatusOr<Link> fit = FitLink(points, 3, "fit");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->bus_gbps, 1.5, 1e-9);
  EXPECT_NEAR(fit->latency_us, 40.0, 1e-6);
  EXPECT_FALSE(FitLink({{1024, 1.0}}, 2, "one").ok());
  EXPECT_FALSE(FitLink({{1024, 2.0}, {2048, 1.0}}, 2, "shrinking").ok());
}

TEST(ScalingModelTest, LinkFilesParseAndRoundTrip) {
  StatusOr<Link> link = ParseLinkFile("# a cluster\nname = lab\nbus_gbps = 7.5  # measured\nlatency_us = 12\n"
                                      "shares_compute = true\ncompute_slowdown = 0.4\ncomm_slowdown = 0.7\nsource = comm_bench\n",
                                      "lab.link");
  ASSERT_TRUE(link.ok()) << link.status().message();
  EXPECT_EQ(link->name, "lab");
  EXPECT_EQ(link->bus_gbps, 7.5);
  EXPECT_EQ(link->latency_us, 12.0);
  EXPECT_TRUE(link->shares_compute);
  EXPECT_EQ(link->compute_slowdown, 0.4);
  EXPECT_EQ(link->comm_slowdown, 0.7);
  StatusOr<Link> again = ParseLinkFile(LinkFileText(*link), "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->bus_gbps, 7.5);
  EXPECT_EQ(again->source, "comm_bench");
  EXPECT_EQ(again->comm_slowdown, 0.7);
  StatusOr<Link> fixed = ParseLinkFile("bus_gbps = 1\nlatency_us = 0\ncompute_per_collective_ms = 2.5\n"
                                       "comm_per_collective_ms = 4\n", "fixed.link");
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  StatusOr<Link> fixed_again = ParseLinkFile(LinkFileText(*fixed), "again");
  ASSERT_TRUE(fixed_again.ok()) << fixed_again.status().message();
  EXPECT_EQ(fixed_again->compute_per_collective_ms, 2.5);
  EXPECT_EQ(fixed_again->comm_per_collective_ms, 4.0);
  EXPECT_FALSE(ParseLinkFile("bus_gbps = 1\nlatency_us = 0\ncomm_per_collective_ms = -1\n", "neg.link").ok());
  for (const Link& preset : LinkPresets()) {
    EXPECT_FALSE(preset.source.empty()) << preset.name;
    EXPECT_FALSE(preset.assumes.empty()) << preset.name;
    StatusOr<Link> loaded = LoadLink(preset.name);
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(loaded->bus_gbps, preset.bus_gbps);
  }
}

TEST(ScalingModelTest, MalformedLinkFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"bus_gbps = 1\nlatency_us 5\n", "bad.link line 2: expected 'key = value'"},
           {"bus_gbps = fast\nlatency_us = 5\n", "bad.link line 1: bus_gbps must be a positive number, got 'fast'"},
           {"bus_gbps = 0\nlatency_us = 5\n", "line 1: bus_gbps must be a positive number"},
           {"bus_gbps = 1\nlatency_us = -5\n", "line 2: latency_us must be a non-negative number"},
           {"bus_gbps = 1\nlatency_us = 5\nbandwidth = 3\n", "line 3: unknown key 'bandwidth'"},
           {"bus_gbps = 1\nlatency_us = 5\nshares_compute = yes\n", "shares_compute must be true or false"},
           {"latency_us = 5\n", "link file bad.link: needs bus_gbps and latency_us"},
       }) {
    StatusOr<Link> link = ParseLinkFile(c.text, "bad.link");
    ASSERT_FALSE(link.ok()) << c.text;
    EXPECT_NE(link.status().message().find(c.message), std::string::npos) << link.status().message();
  }
  StatusOr<Link> missing = LoadLink("/nonexistent/lab.link");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("neither a preset (pcie4-host-bounce"), std::string::npos);
}

TEST(ScalingModelTest, ProfilesAreChecked) {
  EXPECT_FALSE(ParseStepProfile("[1, 2]", "p.json").ok());
  StatusOr<StepProfile> foreign = ParseStepProfile("{\"step_s\": 1}", "p.json");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("p.json: not written by ddp_train --profile-file"), std::string::npos);
  StatusOr<StepProfile> truncated = ParseStepProfile("{\"format\": \"ddp_train step profile 1\", \"model\": \"x\"}", "p.json");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("step profile p.json:"), std::string::npos);
}

TEST(ScalingModelTest, ProfileJsonRoundTrips) {
  StepProfile p = ThreeParams();
  p.world_size = 2;
  p.threads = 3;
  p.timed_steps = 7;
  p.compute_sd_s = 0.004;
  StatusOr<StepProfile> back = ParseStepProfile(StepProfileJson(p).dump(), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model, "toy");
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->threads, 3);
  EXPECT_EQ(back->timed_steps, 7);
  EXPECT_EQ(back->samples_per_step, 8);
  EXPECT_DOUBLE_EQ(back->forward_s, 0.1);
  EXPECT_DOUBLE_EQ(back->other_s, 0.05);
  EXPECT_DOUBLE_EQ(back->compute_sd_s, 0.004);
  ASSERT_EQ(back->params.size(), 3u);
  EXPECT_EQ(back->params[1].name, "b");
  EXPECT_EQ(back->params[1].bytes, 1000000);
  EXPECT_DOUBLE_EQ(back->params[1].ready_s, 0.2);
}

TEST(ScalingModelTest, ProfilesOfOneConfigurationAverage) {
  StepProfile a = ThreeParams(), b = ThreeParams();
  a.path = "a.json";
  b.path = "b.json";
  b.forward_s = 0.3;
  b.step_s = 0.65;
  b.compute_sd_s = 0.02;
  b.params[1].ready_s = 0.25;
  StatusOr<StepProfile> mean = AverageProfiles({a, b});
  ASSERT_TRUE(mean.ok()) << mean.status().message();
  EXPECT_DOUBLE_EQ(mean->forward_s, 0.2);
  EXPECT_DOUBLE_EQ(mean->step_s, 0.55);
  EXPECT_DOUBLE_EQ(mean->backward_s, 0.3);
  EXPECT_DOUBLE_EQ(mean->compute_sd_s, 0.01);
  EXPECT_DOUBLE_EQ(mean->params[0].ready_s, 0.1);
  EXPECT_DOUBLE_EQ(mean->params[1].ready_s, 0.225);
  EXPECT_EQ(mean->params[2].bytes, 1000000);
  EXPECT_EQ(mean->path, "a.json,b.json");

  b.params[2].bytes = 2000000;
  StatusOr<StepProfile> mixed = AverageProfiles({a, b});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("step profiles a.json and b.json differ"), std::string::npos);
  EXPECT_FALSE(AverageProfiles({}).ok());
}

}  // namespace
}  // namespace ddp
