// --cuda-graphs on one GPU: a step replayed from the captured graph gives
// the eager step's loss and gradients bit for bit (deterministic kernels),
// and a changed loss scale captures anew. Reports SKIPPED without a GPU.
#include "launch/step_graph.h"

#include <cstring>

#include <gtest/gtest.h>

#include "models/registry.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/data/image_dataset.h"

namespace ddp {
namespace {

TEST(StepGraphTest, ReplayEqualsTheEagerStep) {
  if (cuda::DeviceCount() == 0) {
    GTEST_SKIP() << (cuda::BuiltWithCuda() ? "no CUDA device visible" : "built without CUDA");
  }
  cuda::SetDevice(0);
  void* stream = cuda::CreateStream();
  cuda::SetCurrentStream(0, stream);
  {
    ExecutionContext ctx = ExecutionContext::Cuda(0, stream);
    ctx.set_deterministic(true);
    ModelOptions m;
    m.name = "resnet18";
    m.num_classes = 10;
    std::unique_ptr<Model> model = std::move(CreateModel(m).value());
    model->MoveTo(ctx.device());
    ImageDataOptions data_options;
    data_options.image_size = 32;
    data_options.num_classes = 10;
    std::unique_ptr<BatchSource> data =
        ImageBatches(std::move(OpenImageDataset("--data", "synthetic", data_options).value()), "synthetic");
    constexpr int64_t kBatch = 4;
    StatusOr<std::unique_ptr<StepGraph>> graph = StepGraph::Create({/*accumulation_steps=*/2, /*world_size=*/1}, ctx,
                                                                    model.get(), nullptr, nullptr, *data, kBatch,
                                                                    "resnet18", "cuda:0");
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    // The eager step: two micro-batches, the loss gradient 1/2 each.
    std::vector<Batch> batches;
    double eager_loss = 0.0;
    for (int64_t micro = 0; micro < 2; ++micro) {
      batches.push_back(LoadBatch(*data, {micro * kBatch, micro * kBatch + 1, micro * kBatch + 2, micro * kBatch + 3},
                                  ctx.device()));
      eager_loss += model->ForwardLoss(ctx, batches.back()).loss;
      model->BackwardLoss(ctx, 0.5, /*accumulate=*/micro > 0);
    }
    const Tensor eager_grads = model->flat_gradients().To(Device::Cpu());
    for (int64_t micro = 0; micro < 2; ++micro) CopyBatch(ctx, batches[micro], (*graph)->input(micro));
    StatusOr<double> replayed = (*graph)->Replay(1.0);
    ASSERT_TRUE(replayed.ok()) << replayed.status().message();
    EXPECT_EQ(*replayed, eager_loss / 2.0);
    const Tensor graph_grads = model->flat_gradients().To(Device::Cpu());
    EXPECT_EQ(std::memcmp(graph_grads.raw_data(), eager_grads.raw_data(), eager_grads.nbytes()), 0);
    EXPECT_EQ((*graph)->captures(), 1);
    ASSERT_TRUE((*graph)->Replay(1.0).ok());
    EXPECT_EQ((*graph)->captures(), 1);  // the same scale: replayed
    ASSERT_TRUE((*graph)->Replay(2.0).ok());
    EXPECT_EQ((*graph)->captures(), 2);  // a new scale: captured anew
    cuda::Synchronize(stream);
  }
  cuda::SetCurrentStream(0, nullptr);
  cuda::DestroyStream(stream);
}

}  // namespace
}  // namespace ddp
