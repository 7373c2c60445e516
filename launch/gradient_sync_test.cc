// Run under mpirun with 2 ranks: after one synchronized backward, plain DDP
// and ZeRO 1/2 each leave every rank holding the exact sum of both ranks'
// gradients (a sum of two floats has one order), clipping brings the global
// norm to the bound, and a non-finite gradient is named on its rank only.
#include "launch/gradient_sync.h"

#include <mpi.h>

#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "models/registry.h"
#include "runtime/data/batch_source.h"
#include "runtime/data/image_dataset.h"

namespace ddp {
namespace {

std::unique_ptr<Model> MakeModel() {
  ModelOptions m;
  m.name = "resnet18";
  m.num_classes = 4;
  m.zero_init_residual = true;
  return std::move(CreateModel(m).value());
}

std::unique_ptr<BatchSource> Data() {
  ImageDataOptions o;
  o.image_size = 32;
  o.num_classes = 4;
  return ImageBatches(std::move(OpenImageDataset("--data", "synthetic", o).value()), "synthetic");
}

// Each parameter's gradient, summed over the ranks, from a model that never
// communicated: the loss gradient 1/world, as the step scales it.
std::map<std::string, std::vector<float>> SummedGradients(ExecutionContext& ctx, const Batch& batch) {
  std::unique_ptr<Model> model = MakeModel();
  model->ForwardLoss(ctx, batch);
  model->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  std::map<std::string, std::vector<float>> sums;
  for (Parameter* p : model->parameters()) {
    std::vector<float> mine(p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
    std::vector<float>& sum = sums[p->name];
    sum.resize(mine.size());
    MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  return sums;
}

class GradientSyncTest : public ::testing::TestWithParam<int> {};

TEST_P(GradientSyncTest, EveryRankHoldsTheSumAndClipsToTheBound) {
  const int zero_stage = GetParam();
  MpiCommunicator comm(MPI_COMM_WORLD);
  ASSERT_EQ(comm.world_size(), 2);
  const int rank = comm.rank();
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<BatchSource> data = Data();
  const Batch batch = LoadBatch(*data, {4 * rank, 4 * rank + 1, 4 * rank + 2, 4 * rank + 3}, Device::Cpu());
  const std::map<std::string, std::vector<float>> expected = SummedGradients(ctx, batch);

  std::unique_ptr<Model> model = MakeModel();
  GradientSyncOptions options;
  options.zero_stage = zero_stage;
  options.bucket_mb = 4.0;
  options.first_bucket_mb = 0.5;
  GradientSync sync(&comm, model.get(), options, ctx);
  EXPECT_EQ(sync.sharded(), zero_stage > 0);
  EXPECT_EQ(sync.reduces_each_micro_batch(), zero_stage == 2);
  EXPECT_STREQ(sync.collective(), zero_stage > 0 ? "reduce-scatter" : "all-reduce");
  sync.PrepareForBackward(0, 1);
  model->ForwardLoss(ctx, batch);
  model->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  StatusOr<double> exposed = sync.WaitMicroBatch(0, 1);
  ASSERT_TRUE(exposed.ok());
  EXPECT_EQ(*exposed, 0.0);  // the last micro-batch waits in Wait
  ASSERT_TRUE(sync.Wait(/*graphed=*/false).ok());

  // What this rank holds, slot by slot (its pieces under ZeRO): the sum.
  double squared = 0.0;
  int64_t held = 0;
  for (const OptimizerSlot& slot : sync.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
    const std::vector<float>& want = expected.at(slot.name);
    for (int64_t i = 0; i < slot.grad.numel(); ++i) {
      ASSERT_EQ(slot.grad.data<float>()[i], want[slot.offset + i]) << slot.name << "[" << slot.offset + i << "]";
      squared += static_cast<double>(want[slot.offset + i]) * want[slot.offset + i];
    }
    held += slot.grad.numel();
  }
  int64_t total = 0;
  for (const auto& [name, g] : expected) total += static_cast<int64_t>(g.size());
  if (zero_stage == 0) {
    EXPECT_EQ(held, total);
  } else {
    EXPECT_LT(held, total);  // a share
  }

  // Clipped to half the global norm: every rank's share scaled alike.
  double global = squared;
  if (zero_stage > 0) MPI_Allreduce(&squared, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  ASSERT_TRUE(sync.ClipToNorm(ctx, 0.5 * std::sqrt(global)).ok());
  double clipped = 0.0;
  for (const Tensor& g : sync.Held()) {
    for (int64_t i = 0; i < g.numel(); ++i) clipped += static_cast<double>(g.data<float>()[i]) * g.data<float>()[i];
  }
  double clipped_global = clipped;
  if (zero_stage > 0) MPI_Allreduce(&clipped, &clipped_global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(std::sqrt(clipped_global), 0.5 * std::sqrt(global), 1e-5 * std::sqrt(global));

  // A NaN on rank 1 is rank 1's to name.
  EXPECT_EQ(sync.FirstNonFinite(ctx), "?");
  if (rank == 1) {
    for (Tensor& g : sync.Held()) {
      if (g.numel() == 0) continue;
      g.data<float>()[0] = std::nanf("");
      break;
    }
    EXPECT_NE(sync.FirstNonFinite(ctx), "?");
  }
  EXPECT_TRUE(sync.AfterUpdate(ctx).ok());
  EXPECT_TRUE(sync.FinishGather().ok());
}

INSTANTIATE_TEST_SUITE_P(Stages, GradientSyncTest, ::testing::Values(0, 1, 2));

TEST(GradientSyncLocalTest, OneRankKeepsItsGradients) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> model = MakeModel();
  GradientSync sync(nullptr, model.get(), GradientSyncOptions(), ctx);
  EXPECT_FALSE(sync.sharded());
  EXPECT_EQ(sync.reducer(), nullptr);
  EXPECT_EQ(sync.zero(), nullptr);
  std::unique_ptr<BatchSource> data = Data();
  sync.PrepareForBackward(0, 1);
  model->ForwardLoss(ctx, LoadBatch(*data, {0, 1}, Device::Cpu()));
  model->BackwardLoss(ctx, 1.0, false);
  StatusOr<ReduceStats> stats = sync.Wait(false);
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->buckets.empty());
  ASSERT_EQ(sync.Held().size(), 1u);
  EXPECT_EQ(sync.Held()[0].raw_data(), model->flat_gradients().raw_data());
  EXPECT_EQ(sync.gradient_bytes(), static_cast<int64_t>(model->flat_gradients().nbytes()));
}

}  // namespace
}  // namespace ddp
