// The memory planner's figures from its own meta runs: the rows add up to
// the peak; the 16-bit copy, the library workspace and ZeRO's shards are
// what the planned device and world hold; the search's largest batch is
// the last one under the budget; the activation bound caps the batch. (The
// plan against real CPU runs is launch/memory_plan_cross_check_test.sh.)
#include "launch/memory_planner.h"

#include <gtest/gtest.h>

#include "launch/small_runs.h"
#include "runtime/execution_context.h"

namespace ddp {
namespace {

TrainOptions MetaRun(const std::string& plan_device) {
  TrainOptions o = SmallResNet18Run();
  o.device = "meta";
  o.plan_device = plan_device;
  return o;
}

int64_t SumOfRows(const MemoryBreakdown& b) {
  return b.parameters + b.low_precision + b.gradients + b.optimizer + b.buffers + b.communication + b.input +
         b.workspace + b.host_data + b.activations;
}

TEST(MemoryPlannerTest, RowsAddUpToThePeakOnEitherDevice) {
  for (const char* device : {"cpu", "cuda"}) {
    StatusOr<MemoryBreakdown> b = MeasureBreakdown(MetaRun(device), 1, 8);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(SumOfRows(*b), b->peak) << device;
    EXPECT_EQ(b->gradients, b->parameters);
    EXPECT_EQ(b->optimizer, b->parameters);  // SGD's momentum
    EXPECT_EQ(b->input, 8 * 3 * 32 * 32 * 4 + 8 * 8) << device;  // images and labels, one batch
    EXPECT_GT(b->activations, 0);
    EXPECT_GE(b->communication, 0);
  }
}

TEST(MemoryPlannerTest, AGpuPlanHoldsTheSixteenBitCopyAndTheLibraryWorkspaces) {
  TrainOptions o = MetaRun("cuda");
  o.precision = "fp16";
  StatusOr<MemoryBreakdown> b = MeasureBreakdown(o, 1, 8);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->low_precision, b->parameters / 2);
  // cuBLASLt's and cuDNN's slot, at the convolutions' bound; cuDNN's
  // 16-bit weight-gradient staging, as large as the largest convolution's
  // weights (layer4's 512 x 512 x 3 x 3); the loss gradient's 16-bit
  // staging (a few hundred bytes).
  const int64_t staging = int64_t{512} * 512 * 9 * 2;
  EXPECT_GE(b->workspace, ExecutionContext::kConvWorkspaceBoundBytes + staging);
  EXPECT_LT(b->workspace, ExecutionContext::kConvWorkspaceBoundBytes + staging + 4096);
  EXPECT_EQ(SumOfRows(*b), b->peak);
}

TEST(MemoryPlannerTest, ZeroTwoOverFourRanksKeepsAQuarterOfGradientsAndOptimizerState) {
  TrainOptions o = MetaRun("cuda");
  o.optimizer = "adamw";
  o.zero_stage = 2;
  StatusOr<MemoryBreakdown> one = MeasureBreakdown(o, 1, 8), four = MeasureBreakdown(o, 4, 8);
  ASSERT_TRUE(one.ok() && four.ok());
  EXPECT_EQ(one->optimizer, 2 * one->parameters);  // AdamW's two moments
  // Each rank's pieces: a quarter, padded to the buckets' whole elements.
  EXPECT_NEAR(static_cast<double>(four->optimizer), one->optimizer / 4.0, 0.01 * one->optimizer);
  EXPECT_NEAR(static_cast<double>(four->gradients), one->gradients / 4.0, 0.01 * one->gradients);
  EXPECT_EQ(SumOfRows(*four), four->peak);
}

// A GPU rank whose masters ZeRO shards builds the model on the host: at
// stage 3 over 4 ranks its device's start-up peak is what it keeps from
// then on (its pieces, the optimizer state, the bucket pool), cuBLASLt's
// workspace and a 4 MiB bucket in flight, never the whole f32 model (44.7
// MB for ResNet-18) nor its gradients.
TEST(MemoryPlannerTest, ZeroThreeStartsAGpuRankFromItsPieces) {
  TrainOptions o = MetaRun("cuda");
  o.optimizer = "adamw";
  o.zero_stage = 3;
  o.bucket_mb = 4.0;
  StatusOr<MemoryBreakdown> b = MeasureBreakdown(o, 4, 8);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const int64_t kept = b->parameters + b->gradients + b->optimizer + b->buffers + b->communication + b->input;
  EXPECT_LE(b->setup_peak, kept + ExecutionContext::kGemmWorkspaceBytes + (8 << 20))
      << b->setup_peak << " at start-up, " << kept << " kept; the whole f32 model " << b->parameter_count * 4;
}

TEST(MemoryPlannerTest, TheLargestBatchIsTheLastUnderTheBudget) {
  MemoryPlanRequest request;
  request.options = MetaRun("cpu");
  request.options.plan_memory = int64_t{300} << 20;
  request.overhead = int64_t{20} << 20;
  StatusOr<MemoryPlan> plan = PlanMemory(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const int64_t b = plan->largest_batch;
  ASSERT_GT(b, 2);
  StatusOr<MemoryBreakdown> at = MeasureBreakdown(request.options, 1, b),
                            above = MeasureBreakdown(request.options, 1, b + 1);
  ASSERT_TRUE(at.ok() && above.ok());
  EXPECT_LE(at->peak + request.overhead, request.options.plan_memory);
  EXPECT_GT(above->peak + request.overhead, request.options.plan_memory);
  EXPECT_EQ(plan->at.batch_size, b);
  EXPECT_EQ(plan->at.peak, at->peak);
  EXPECT_GT(plan->per_sample, 0.0);
  EXPECT_TRUE(CheckSomeBatchFits(*plan).ok());
  // The record holds the budget, the overhead and every row in bytes.
  const nlohmann::ordered_json j = PlanJson(*plan)["plan"];
  EXPECT_EQ(j["largest_batch"], b);
  EXPECT_EQ(j["budget_bytes"], request.options.plan_memory);
  EXPECT_EQ(j["overhead_bytes"], request.overhead);
  EXPECT_EQ(j["rows_bytes"]["parameters"], at->parameters);
  EXPECT_EQ(j["peak_bytes"], at->peak);
}

TEST(MemoryPlannerTest, NoBatchFitsWhenTheStateAloneIsPastTheBudget) {
  MemoryPlanRequest request;
  request.options = MetaRun("cpu");
  request.options.plan_memory = int64_t{50} << 20;  // ResNet-18's weights, gradients and momentum: 128 MiB
  request.overhead_source = "--plan-overhead";
  StatusOr<MemoryPlan> plan = PlanMemory(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->largest_batch, 0);
  const Status why = CheckSomeBatchFits(*plan);
  EXPECT_FALSE(why.ok());
  EXPECT_NE(why.message().find("no batch fits; the model's state alone"), std::string::npos) << why.message();
}

TEST(MemoryPlannerTest, TheActivationBoundCapsTheBatch) {
  MemoryPlanRequest request;
  request.options = MetaRun("cpu");
  request.options.image_size = 224;
  request.options.plan_memory = int64_t{1} << 50;  // no memory limit in sight
  StatusOr<MemoryPlan> plan = PlanMemory(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // conv1's output, [B, 64, 112, 112], is the largest activation.
  EXPECT_EQ(plan->largest_batch, kMaxActivationElements / (64 * 112 * 112));
  EXPECT_EQ(plan->bound_batch, plan->largest_batch + 1);
  EXPECT_NE(PlanText(*plan).find("at 2675 an activation would pass the 2^31 - 1 elements"), std::string::npos)
      << PlanText(*plan);
}

TEST(MemoryPlannerTest, TensorsThatDoNotGrowWithTheBatchBoundNothing) {
  // BERT pretraining's tied word-embedding gradient, [30522, 768] f32, is
  // made inside the loss's scope at every batch: the bound comes from the
  // activations that grow, and a large --batch-size is planned.
  MemoryPlanRequest request;
  request.options = MetaRun("cuda");
  request.options.model = "bert-base";
  request.options.seq_len = 128;
  request.options.optimizer = "adamw";
  request.options.batch_size = 512;
  request.options.batch_size_given = true;
  StatusOr<MemoryPlan> plan = PlanMemory(request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->at.batch_size, 512);
  EXPECT_FALSE(plan->at.past_activation_bound);
}

}  // namespace
}  // namespace ddp
