// The summary assembled from one rank's parts: what ran, the meter's timed
// figures, how the run ended, and the memory measured from the parts.
#include "launch/run_summary.h"

#include "launch/small_runs.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(RunSummaryTest, FromOneRanksParts) {
  TrainOptions o = SmallResNet18Run();
  o.batch_size = 4;
  o.steps = 6;
  o.device = "cpu";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  ProgressPrinter progress(0, false);
  TrainComponents parts;
  ASSERT_TRUE(BuildComponents(o, nullptr, RankInfo(), ctx, FaultInjection(), &progress, &parts).ok());
  Allocator& memory = *GetAllocator(Device::Cpu());
  const int64_t persistent = memory.bytes_in_use(), setup_peak = memory.peak_bytes_in_use();

  RunMeter meter(2);
  for (int64_t i = 0; i < 6; ++i) meter.AddStep(i, 0.5, 0.0, 0, 0.0, 0.4, 0.0, 0, false);
  StatusOr<RankTimes> times = GatherRankTimes(nullptr, meter.compute_times(), meter.wait_times());
  ASSERT_TRUE(times.ok());
  RunEnd end;
  end.steps = 6;
  end.final_loss = 1.25;
  end.eval_accuracy = 0.5;
  end.eval_label = "accuracy";
  const MemoryFigures m = MeasureMemory(parts, ctx, memory, persistent, setup_peak);
  EXPECT_EQ(m.param_bytes, static_cast<int64_t>(parts.model->flat_parameters().nbytes()));
  EXPECT_EQ(m.low_precision_bytes, 0);  // fp32
  int64_t statistics = 0;  // batch norm's running mean and variance (and its batch count)
  for (const Buffer* b : parts.model->buffers()) statistics += static_cast<int64_t>(b->value.nbytes());
  EXPECT_GT(statistics, 0);
  EXPECT_EQ(m.buffer_bytes, statistics);
  EXPECT_EQ(m.workspace_bytes, ctx.scratch_bytes());
  EXPECT_EQ(m.grad_bytes, m.param_bytes);  // one rank: a flat gradient buffer as large
  EXPECT_EQ(m.optimizer_bytes, m.param_bytes);  // SGD's momentum
  EXPECT_GE(m.peak_bytes, setup_peak);
  EXPECT_GT(m.peak_resident_bytes, 0);

  const RunSummary s = Summarize(o, RankInfo(), parts, meter, *times, end, m);
  EXPECT_EQ(s.model, "resnet18");
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.memory_format, "channels_last");
  EXPECT_EQ(s.compute_dtype, "f32");
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(s.total_steps, 6);
  EXPECT_EQ(s.warmup_steps, 2);
  EXPECT_DOUBLE_EQ(s.samples_per_s, 4 * 4 / 2.0);  // 4 timed steps of 4 images in 2 s
  EXPECT_FALSE(s.exposed_comm_s.has_value());      // one rank
  EXPECT_FALSE(s.cuda_graph_captures.has_value());
  EXPECT_FALSE(s.zero_gather_dtype.has_value());
  EXPECT_FALSE(s.preempted_at_step.has_value());
  EXPECT_FALSE(s.loss_scaling);
  EXPECT_EQ(s.compute_s["median"].get<double>(), 0.4);
  EXPECT_STREQ(s.noun, "images");
  EXPECT_EQ(s.seq_len, 0);
  EXPECT_EQ(*s.eval_accuracy, 0.5);
  EXPECT_EQ(s.final_loss, 1.25);
  EXPECT_EQ(s.memory.param_bytes, m.param_bytes);
  RunEnd stopped = end;
  stopped.steps = 4;
  stopped.preempted = true;
  EXPECT_EQ(*Summarize(o, RankInfo(), parts, meter, *times, stopped, m).preempted_at_step, 4);
}

}  // namespace
}  // namespace ddp
