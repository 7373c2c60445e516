// The contention probe's protocol under a real mpirun (2 and 3 ranks):
// timed steps alternate loaded (two sizes in turn) and quiet, every rank
// issues the same collectives even when their steps take different times
// (no hang), loaded collectives are counted only while every rank computes,
// quiet ones are exactly kQuietCollectives a quiet step and size, and the
// result is each rank's medians averaged over ranks, fitted.
#include "comm/contention_probe.h"

#include <mpi.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"

namespace ddp {
namespace {

MpiCommunicator& Comm() {
  static MpiCommunicator* comm = new MpiCommunicator(MPI_COMM_WORLD);
  return *comm;
}

// A step's backward: a sleep, longer on higher ranks, so ranks finish at
// different times and the load must run until the last is done.
void Compute(int rank) { std::this_thread::sleep_for(std::chrono::milliseconds(40 + 30 * rank)); }

TEST(ContentionProbeTest, AlternatesStepsAndAveragesEveryRanksMedians) {
  MpiCommunicator& c = Comm();
  const int n = c.world_size(), r = c.rank();
  ContentionProbe probe(&c, /*bytes=*/256 << 10, /*small_bytes=*/64 << 10);
  // 2 untimed steps, then 10 timed: loaded (256 KiB), quiet, loaded (64
  // KiB), quiet, ... (3, 5 and 2). The backward time reported: rank r's
  // (r + 1) x 10 ms on quiet steps, x 15 ms on the large load's and x 18 ms
  // on the small one's, plus a step number's worth of noise the medians
  // must see through (one outlier on each side).
  int timed = 0;
  for (int step = 0; step < 12; ++step) {
    const bool is_timed = step >= 2;
    ASSERT_TRUE(probe.StepStarting(is_timed).ok());
    probe.BackwardStarted();
    Compute(r);
    probe.BackwardFinished();
    const bool loaded = is_timed && timed % 2 == 0, small = loaded && timed % 4 == 2;
    double reported = (r + 1) * (small ? 0.018 : loaded ? 0.015 : 0.010);
    if (timed == 1) reported *= 5.0;  // a quiet outlier
    if (timed == 8) reported *= 9.0;  // a loaded outlier
    if (is_timed) ++timed;
    ASSERT_TRUE(probe.StepFinished(reported).ok());
  }
  StatusOr<ContentionResult> result = probe.Finish();
  ASSERT_TRUE(result.ok()) << result.status().message();
  const double mean_rank = (n + 1) / 2.0;
  EXPECT_EQ(result->ranks, n);
  EXPECT_EQ(result->large.bytes, 256 << 10);
  EXPECT_EQ(result->small.bytes, 64 << 10);
  EXPECT_EQ(result->loaded_steps, 5);
  EXPECT_EQ(result->quiet_steps, 5);
  EXPECT_NEAR(result->compute_quiet_s, mean_rank * 0.010, 1e-12);
  EXPECT_NEAR(result->large.backward_s, mean_rank * 0.015, 1e-12);
  EXPECT_NEAR(result->small.backward_s, mean_rank * 0.018, 1e-12);
  EXPECT_EQ(result->quiet_collectives, 5 * 2 * ContentionProbe::kQuietCollectives * n);
  EXPECT_GT(result->collective_cold_s, 0.0);
  // A 256 KiB all-reduce over shared memory takes well under a millisecond:
  // 3 loaded steps of at least 40 ms give every rank many, of either size.
  // Which size starts more is the link's latency against its bandwidth (on
  // shared memory both are latency) and the machine's load: no order.
  EXPECT_GE(result->loaded_collectives, 5 * n);
  EXPECT_GE(result->large.collectives, 1.0);
  EXPECT_GE(result->small.collectives, 1.0);
  for (const ContentionLoad* load : {&result->large, &result->small}) {
    EXPECT_GT(load->collective_quiet_s, 0.0);
    EXPECT_GT(load->collective_loaded_s, 0.0);
  }
  // The fit is over these averaged figures.
  const Contention fitted = FitContention(result->compute_quiet_s, result->large, &result->small);
  EXPECT_EQ(result->fitted.compute_slowdown, fitted.compute_slowdown);
  EXPECT_EQ(result->fitted.compute_per_collective_s, fitted.compute_per_collective_s);
  EXPECT_EQ(result->fitted.comm_slowdown, fitted.comm_slowdown);
  EXPECT_EQ(result->fitted.comm_per_collective_s, fitted.comm_per_collective_s);
}

TEST(ContentionProbeTest, WithoutALoadedStepEveryRankFails) {
  MpiCommunicator& c = Comm();
  ContentionProbe probe(&c, 4096, 1024);
  for (int step = 0; step < 3; ++step) {  // warm-up only
    ASSERT_TRUE(probe.StepStarting(/*timed=*/false).ok());
    probe.BackwardStarted();
    probe.BackwardFinished();
    ASSERT_TRUE(probe.StepFinished(0.01).ok());
  }
  StatusOr<ContentionResult> result = probe.Finish();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("needs a quiet timed step and a loaded one of each size"),
            std::string::npos)
      << result.status().message();
}

TEST(ContentionProbeTest, ResultFileHasEveryFigure) {
  ContentionResult r;
  r.ranks = 2, r.loaded_steps = 6, r.quiet_steps = 6;
  r.compute_quiet_s = 2.0;
  r.large = {1 << 24, 2.5, 7.0, 0.1, 0.13};
  r.small = {1 << 22, 2.75, 20.0, 0.03, 0.04};
  r.fitted = FitContention(r.compute_quiet_s, r.large, &r.small);
  const std::string json = ContentionResultJson(r, "resnet50");
  for (const char* key : {"\"format\": \"ddp_train contention probe 2\"", "\"model\": \"resnet50\"", "\"ranks\": 2",
                          "\"bytes\": 16777216", "\"bytes\": 4194304", "\"collectives_per_backward\": 20.0",
                          "\"compute_slowdown\"", "\"compute_per_collective_ms\"", "\"comm_per_collective_ms\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  // One size: no "small".
  r.small = ContentionLoad();
  EXPECT_EQ(ContentionResultJson(r, "resnet50").find("\"small\""), std::string::npos);
}

}  // namespace
}  // namespace ddp
