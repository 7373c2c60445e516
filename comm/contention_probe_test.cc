// The contention probe's protocol under a real mpirun (2 and 3 ranks):
// timed steps alternate loaded and quiet, every rank issues the same
// collectives even when their steps take different times (no hang), loaded
// collectives are counted only while every rank computes, quiet ones are
// exactly kQuietCollectives a quiet step, and the result is each rank's
// medians averaged over ranks.
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
  ContentionProbe probe(&c, /*bytes=*/256 << 10);
  // 2 untimed steps, then 7 timed: loaded, quiet, loaded, ... (4 and 3).
  // The backward time reported: rank r's (r + 1) x 10 ms on quiet steps and
  // (r + 1) x 15 ms on loaded ones, plus a step number's worth of noise the
  // medians must see through (one outlier on each side).
  int timed = 0;
  for (int step = 0; step < 9; ++step) {
    const bool is_timed = step >= 2;
    ASSERT_TRUE(probe.StepStarting(is_timed).ok());
    probe.BackwardStarted();
    Compute(r);
    probe.BackwardFinished();
    const bool loaded = is_timed && timed % 2 == 0;
    double reported = (r + 1) * (loaded ? 0.015 : 0.010);
    if (timed == 1) reported *= 5.0;  // a quiet outlier
    if (timed == 6) reported *= 9.0;  // a loaded outlier
    if (is_timed) ++timed;
    ASSERT_TRUE(probe.StepFinished(reported).ok());
  }
  StatusOr<ContentionResult> result = probe.Finish();
  ASSERT_TRUE(result.ok()) << result.status().message();
  const double mean_rank = (n + 1) / 2.0;
  EXPECT_EQ(result->ranks, n);
  EXPECT_EQ(result->bytes, 256 << 10);
  EXPECT_EQ(result->loaded_steps, 4);
  EXPECT_EQ(result->quiet_steps, 3);
  EXPECT_NEAR(result->compute_quiet_s, mean_rank * 0.010, 1e-12);
  EXPECT_NEAR(result->compute_loaded_s, mean_rank * 0.015, 1e-12);
  EXPECT_NEAR(result->compute_slowdown(), 0.5, 1e-9);
  EXPECT_EQ(result->quiet_collectives, 3 * ContentionProbe::kQuietCollectives * n);
  EXPECT_GT(result->collective_cold_s, 0.0);
  // A 256 KiB all-reduce over shared memory takes well under a millisecond:
  // 4 loaded steps of at least 40 ms give every rank many.
  EXPECT_GE(result->loaded_collectives, 4 * n);
  EXPECT_GT(result->collective_quiet_s, 0.0);
  EXPECT_GT(result->collective_loaded_s, 0.0);
}

TEST(ContentionProbeTest, WithoutALoadedStepEveryRankFails) {
  MpiCommunicator& c = Comm();
  ContentionProbe probe(&c, 4096);
  for (int step = 0; step < 3; ++step) {  // warm-up only
    ASSERT_TRUE(probe.StepStarting(/*timed=*/false).ok());
    probe.BackwardStarted();
    probe.BackwardFinished();
    ASSERT_TRUE(probe.StepFinished(0.01).ok());
  }
  StatusOr<ContentionResult> result = probe.Finish();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("needs a loaded and a quiet timed step"), std::string::npos)
      << result.status().message();
}

TEST(ContentionProbeTest, ResultFileHasEveryFigure) {
  ContentionResult r;
  r.ranks = 2, r.bytes = 1 << 24, r.loaded_steps = 5, r.quiet_steps = 5;
  r.compute_quiet_s = 2.0, r.compute_loaded_s = 2.5, r.collective_quiet_s = 0.1, r.collective_loaded_s = 0.13;
  const std::string json = ContentionResultJson(r, "resnet50");
  for (const char* key : {"\"format\": \"ddp_train contention probe 1\"", "\"model\": \"resnet50\"",
                          "\"compute_slowdown\": 0.25", "\"ranks\": 2", "\"bytes\": 16777216"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  EXPECT_NEAR(r.comm_slowdown(), 0.3, 1e-12);
}

}  // namespace
}  // namespace ddp
