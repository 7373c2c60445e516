// Run under mpirun (1 and 2 ranks): held-out accuracy over a tensors:
// file equals the count of single-sample evaluations of every sample on
// this rank alone, after rank 0's batch-norm statistics were broadcast.
#include "launch/evaluator.h"

#include <mpi.h>

#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "models/registry.h"
#include "runtime/data/image_dataset.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

constexpr int64_t kSamples = 11, kImage = 32, kClasses = 4;

std::string WriteDataset() {
  const std::string path = std::string(::testing::TempDir()) + "/eval.safetensors";
  std::mt19937 random(7);
  std::normal_distribution<float> pixel;
  Tensor images = Tensor::Empty({kSamples, 3, kImage, kImage}, DType::kF32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = pixel(random);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < kSamples; ++i) labels.push_back(i % kClasses);
  const Status written = WriteSafetensors(
      path, {{"images", images}, {"labels", Tensor::FromVector<int64_t>(labels, {kSamples})}}, {});
  EXPECT_TRUE(written.ok()) << written.message();
  return path;
}

TEST(EvaluatorTest, EveryRankGetsTheCountOfEverySample) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int rank = comm.rank(), world = comm.world_size();
  // Every rank writes the same file; each reads its own copy.
  std::string path;
  for (int r = 0; r < world; ++r) {
    if (r == rank) path = WriteDataset();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ImageDataOptions data_options;
  data_options.train = false;
  data_options.num_classes = kClasses;
  StatusOr<std::unique_ptr<ImageDataset>> images = OpenImageDataset("--eval-data", "tensors:" + path, data_options);
  ASSERT_TRUE(images.ok()) << images.status().message();
  std::unique_ptr<BatchSource> data = ImageBatches(std::move(*images), "tensors:" + path);

  ModelOptions m;
  m.name = "resnet18";
  m.num_classes = kClasses;
  std::unique_ptr<Model> model = std::move(CreateModel(m).value());
  // Ranks' batch-norm statistics differ, as training leaves them; rank 0's
  // are the ones evaluated with.
  for (Buffer* b : model->buffers()) {
    if (b->value.dtype() == DType::kF32) b->value.Fill(b->name.find("running_var") != std::string::npos ? 1.5 + rank : 0.1 * (rank + 1));
  }
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  EvaluatorOptions options;
  options.batch_size = 3;
  options.rank = rank;
  options.world_size = world;
  StatusOr<Evaluation> evaluation = Evaluate(ctx, *model, *data, world > 1 ? &comm : nullptr, options, 0);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status().message();
  EXPECT_EQ(evaluation->label, "accuracy");
  for (Buffer* b : model->buffers()) {
    if (b->value.dtype() != DType::kF32) continue;
    const float want = b->name.find("running_var") != std::string::npos ? 1.5f : 0.1f;  // rank 0's
    EXPECT_EQ(b->value.data<float>()[0], want) << b->name;
  }
  // Each sample alone, on this rank, with the buffers now everyone's.
  model->SetTraining(false);
  int64_t correct = 0;
  for (int64_t i = 0; i < kSamples; ++i) {
    correct += model->ForwardLoss(ctx, LoadBatch(*data, {i}, Device::Cpu())).counts.at(0).correct;
  }
  model->SetTraining(true);
  EXPECT_EQ(evaluation->accuracy, static_cast<double>(correct) / kSamples);
}

}  // namespace
}  // namespace ddp
