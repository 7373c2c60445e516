// One rank's parts built from the options: what each is, the options it
// completes (the run's length, the linear scaling rule's learning rate,
// the loader threads), and refusals before anything trains.
#include "launch/train_components.h"

#include "launch/small_runs.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TrainOptions Small() {
  TrainOptions o = SmallResNet18Run();
  o.batch_size = 4;
  o.accumulation_steps = 2;
  o.steps = 7;
  o.threads = 1;
  o.lr = 0.0;  // the linear scaling rule
  return o;
}

TEST(TrainComponentsTest, OneRankOnTheCpu) {
  TrainOptions o = Small();
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  ProgressPrinter progress(0, false);
  TrainComponents parts;
  const Status built = BuildComponents(o, nullptr, RankInfo(), ctx, FaultInjection(), &progress, &parts);
  ASSERT_TRUE(built.ok()) << built.message();
  EXPECT_EQ(parts.total_steps, 7);
  EXPECT_EQ(parts.start_step, 0);
  EXPECT_EQ(parts.sampler->global_batch(), 8);
  EXPECT_DOUBLE_EQ(o.lr, 0.1 * 8 / 256);  // ResNet's rule: 0.1 x global batch / 256
  EXPECT_EQ(o.schedule.total_steps, 7);
  EXPECT_EQ(o.loader_threads, 1);  // a CPU rank: one beside the compute threads
  EXPECT_EQ(parts.precision->compute_dtype(), DType::kF32);
  EXPECT_TRUE(parts.model->channels_last());  // the CPU default for images
  ASSERT_NE(parts.sync, nullptr);
  EXPECT_FALSE(parts.sync->sharded());
  EXPECT_EQ(parts.sync->reducer(), nullptr);  // one rank: nothing to reduce
  ASSERT_NE(parts.optimizer, nullptr);
  EXPECT_EQ(parts.optimizer->state_names(), std::vector<std::string>{"momentum_buffer"});
  ASSERT_NE(parts.input, nullptr);
  EXPECT_FALSE(parts.input->staged());  // generated in place
  EXPECT_EQ(parts.checkpoints, nullptr);
  EXPECT_EQ(parts.step_graph, nullptr);
  EXPECT_EQ(parts.profiler, nullptr);
  EXPECT_FALSE(parts.precision->scaler().enabled());
}

TEST(TrainComponentsTest, RefusedBeforeTraining) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  ProgressPrinter progress(0, false);
  {
    TrainOptions o = Small();
    o.precision = "fp16";
    TrainComponents parts;
    const Status s = BuildComponents(o, nullptr, RankInfo(), ctx, FaultInjection(), &progress, &parts);
    EXPECT_EQ(s.message(), "--precision fp16 is for GPUs; on the CPU use --precision bf16");
  }
  {
    TrainOptions o = Small();
    o.steps = 0;
    TrainComponents parts;
    const Status s = BuildComponents(o, nullptr, RankInfo(), ctx, FaultInjection(), &progress, &parts);
    EXPECT_EQ(s.message(), "--steps 0 comes to no step");
  }
  {
    TrainOptions o = Small();
    o.metrics_file = std::string(::testing::TempDir()) + "/same";
    o.save_weights = o.metrics_file;
    TrainComponents parts;
    const Status s = BuildComponents(o, nullptr, RankInfo(), ctx, FaultInjection(), &progress, &parts);
    EXPECT_NE(s.message().find("one would overwrite the other"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace ddp
