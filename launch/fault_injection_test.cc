// The test hooks' parse from the environment: each variable read into its
// fields, a malformed one refused naming it, and a hook firing only at its
// rank and step.
#include "launch/fault_injection.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace ddp {
namespace {

const char* const kVariables[] = {"DDP_TEST_INJECT_NONFINITE_GRAD", "DDP_TEST_STATE_DIGEST", "DDP_TEST_CHECKPOINT_CRASH",
                                  "DDP_TEST_STOP_IN_BACKWARD",      "DDP_TEST_THROW",        "DDP_TEST_BUSY_GPU",
                                  "DDP_TEST_SLOW_LOADER_MS",        "DDP_TEST_SLOW_RANK",    "DDP_TEST_STOP_AT_END"};

class FaultInjectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVariables) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(FaultInjectionTest, NoneSetIsNoHook) {
  StatusOr<FaultInjection> f = FaultInjection::FromEnvironment();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->NonfiniteGradientAt(1, 0));
  EXPECT_FALSE(f->print_state_digest);
  EXPECT_EQ(f->checkpoint_crash, "");
  EXPECT_EQ(f->stop_in_backward_rank, -1);
  EXPECT_EQ(f->throw_rank, -1);
  EXPECT_EQ(f->busy_gpu_rank, -1);
  EXPECT_EQ(f->slow_rank, -1);
  EXPECT_EQ(f->slow_loader_ms, 0);
  EXPECT_EQ(f->stop_at_end_rank, -1);
}

TEST_F(FaultInjectionTest, EachVariableIntoItsFields) {
  setenv("DDP_TEST_INJECT_NONFINITE_GRAD", "7:2", 1);
  setenv("DDP_TEST_STATE_DIGEST", "1", 1);
  setenv("DDP_TEST_CHECKPOINT_CRASH", "manifest:0:4", 1);
  setenv("DDP_TEST_STOP_IN_BACKWARD", "1:3", 1);
  setenv("DDP_TEST_THROW", "2:5", 1);
  setenv("DDP_TEST_BUSY_GPU", "0:9", 1);
  setenv("DDP_TEST_SLOW_LOADER_MS", "25", 1);
  setenv("DDP_TEST_SLOW_RANK", "3:40", 1);
  setenv("DDP_TEST_STOP_AT_END", "1", 1);
  StatusOr<FaultInjection> f = FaultInjection::FromEnvironment();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->NonfiniteGradientAt(7, 2));
  EXPECT_FALSE(f->NonfiniteGradientAt(7, 1));
  EXPECT_FALSE(f->NonfiniteGradientAt(6, 2));
  EXPECT_TRUE(f->print_state_digest);
  EXPECT_EQ(f->checkpoint_crash, "manifest:0:4");
  EXPECT_EQ(f->stop_in_backward_rank, 1);
  EXPECT_EQ(f->stop_in_backward_step, 3);
  EXPECT_EQ(f->throw_rank, 2);
  EXPECT_EQ(f->throw_step, 5);
  EXPECT_EQ(f->busy_gpu_rank, 0);
  EXPECT_EQ(f->busy_gpu_step, 9);
  EXPECT_EQ(f->slow_loader_ms, 25);
  EXPECT_EQ(f->slow_rank, 3);
  EXPECT_EQ(f->slow_rank_ms, 40);
  EXPECT_EQ(f->stop_at_end_rank, 1);
}

TEST_F(FaultInjectionTest, MalformedIsRefusedNamingTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"DDP_TEST_INJECT_NONFINITE_GRAD", "0:1"}, {"DDP_TEST_INJECT_NONFINITE_GRAD", "3"},
      {"DDP_TEST_STOP_IN_BACKWARD", "1:0"},      {"DDP_TEST_THROW", "-1:2"},
      {"DDP_TEST_BUSY_GPU", "1:2x"},             {"DDP_TEST_SLOW_RANK", "1"},
      {"DDP_TEST_SLOW_LOADER_MS", "-5"},         {"DDP_TEST_STOP_AT_END", "one"}};
  for (const auto& [name, value] : bad) {
    SetUp();
    setenv(name, value, 1);
    StatusOr<FaultInjection> f = FaultInjection::FromEnvironment();
    ASSERT_FALSE(f.ok()) << name << "=" << value;
    EXPECT_EQ(f.status().message().rfind(std::string(name) + " '" + value + "' is not ", 0), 0u)
        << f.status().message();
  }
}

TEST_F(FaultInjectionTest, ThrowFiresAtItsRankStepAndFirstMicroBatchOnly) {
  setenv("DDP_TEST_THROW", "1:4", 1);
  StatusOr<FaultInjection> f = FaultInjection::FromEnvironment();
  ASSERT_TRUE(f.ok());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  EXPECT_NO_THROW(f->BetweenForwardAndBackward(4, 0, 0, ctx, 8, 300.0));  // another rank
  EXPECT_NO_THROW(f->BetweenForwardAndBackward(3, 0, 1, ctx, 8, 300.0));  // another step
  EXPECT_NO_THROW(f->BetweenForwardAndBackward(4, 1, 1, ctx, 8, 300.0));  // a later micro-batch
  try {
    f->BetweenForwardAndBackward(4, 0, 1, ctx, 8, 300.0);
    ADD_FAILURE() << "no exception";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 1 cannot read sample 8: it is corrupt (DDP_TEST_THROW)");
  }
}

}  // namespace
}  // namespace ddp
