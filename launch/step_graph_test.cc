// --cuda-graphs on one GPU: a step replayed from the captured graph gives
// the eager step's loss and gradients bit for bit (deterministic kernels),
// for ResNet and for BERT's three heads, and a changed loss scale captures
// anew. Reports SKIPPED without a GPU.
#include "launch/step_graph.h"

#include <cstring>

#include <gtest/gtest.h>

#include "models/bert.h"
#include "models/registry.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/data/image_dataset.h"
#include "runtime/data/token_dataset.h"
#include "runtime/testing/gpu_testing.h"

namespace ddp {
namespace {

// One model's step on cuda:0, eagerly and from the graph: two
// micro-batches of four, the loss gradient 1/2 each.
class StepGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
    stream_ = std::make_unique<testing::ComputeStream>(0);
    ctx_ = std::make_unique<ExecutionContext>(ExecutionContext::Cuda(0, stream_->get()));
    ctx_->set_deterministic(true);
  }

  void Build(const ModelOptions& m) {
    model_ = std::move(CreateModel(m).value());
    model_->MoveTo(ctx_->device());
    if (m.name.rfind("bert", 0) == 0) {
      TokenDataOptions t;
      t.seq_len = 16;
      t.vocab_size = BertConfigFor(m.name)->vocab_size;
      t.classes = m.task == "classification" ? m.num_classes : 0;
      t.question_answering = m.task == "question-answering";
      data_ = TokenBatches(std::move(OpenTokenDataset("--data", "synthetic", t).value()), "synthetic");
    } else {
      ImageDataOptions d;
      d.image_size = 32;
      d.num_classes = m.num_classes;
      data_ = ImageBatches(std::move(OpenImageDataset("--data", "synthetic", d).value()), "synthetic");
    }
  }

  StatusOr<std::unique_ptr<StepGraph>> Graph(const std::string& name) {
    return StepGraph::Create({/*accumulation_steps=*/2, /*world_size=*/1}, *ctx_, model_.get(), nullptr, nullptr,
                             *data_, kBatch, name, "cuda:0");
  }

  // The eager step, then the graph's replay of the same batches: the same
  // loss and gradients bit for bit, and a changed loss scale captures anew.
  void ExpectReplayEqualsEager(const std::string& name) {
    StatusOr<std::unique_ptr<StepGraph>> graph = Graph(name);
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    std::vector<Batch> batches;
    double eager_loss = 0.0;
    for (int64_t micro = 0; micro < 2; ++micro) {
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < kBatch; ++i) indices.push_back(micro * kBatch + i);
      batches.push_back(LoadBatch(*data_, indices, ctx_->device()));
      eager_loss += model_->ForwardLoss(*ctx_, batches.back()).loss;
      model_->BackwardLoss(*ctx_, 0.5, /*accumulate=*/micro > 0);
    }
    const Tensor eager_grads = model_->flat_gradients().To(Device::Cpu());
    for (int64_t micro = 0; micro < 2; ++micro) CopyBatch(*ctx_, batches[micro], (*graph)->input(micro));
    StatusOr<double> replayed = (*graph)->Replay(1.0);
    ASSERT_TRUE(replayed.ok()) << replayed.status().message();
    EXPECT_EQ(*replayed, eager_loss / 2.0);
    const Tensor graph_grads = model_->flat_gradients().To(Device::Cpu());
    EXPECT_EQ(std::memcmp(graph_grads.raw_data(), eager_grads.raw_data(), eager_grads.nbytes()), 0);
    EXPECT_EQ((*graph)->captures(), 1);
    ASSERT_TRUE((*graph)->Replay(1.0).ok());
    EXPECT_EQ((*graph)->captures(), 1);  // the same scale: replayed
    ASSERT_TRUE((*graph)->Replay(2.0).ok());
    EXPECT_EQ((*graph)->captures(), 2);  // a new scale: captured anew
  }

  static constexpr int64_t kBatch = 4;
  std::unique_ptr<testing::ComputeStream> stream_;  // released last
  std::unique_ptr<ExecutionContext> ctx_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchSource> data_;
};

ModelOptions BertTinyClassifier(float dropout) {
  ModelOptions m;
  m.name = "bert-tiny";
  m.task = "classification";
  m.num_classes = 3;
  m.dropout = dropout;
  return m;
}

TEST_F(StepGraphTest, ResNetReplayEqualsTheEagerStep) {
  ModelOptions m;
  m.name = "resnet18";
  m.num_classes = 10;
  Build(m);
  ExpectReplayEqualsEager("resnet18");
}

// BERT's classification head through classification_loss's device-side
// path: without dropout, the graph's step is the eager step.
TEST_F(StepGraphTest, BertClassifierReplayEqualsTheEagerStep) {
  Build(BertTinyClassifier(/*dropout=*/0.0f));
  ExpectReplayEqualsEager("bert-tiny");
}

// Pretraining (the data source's mlm_positions, the MLM and NSP losses on
// the device) and question answering: the graph's step is the eager step.
TEST_F(StepGraphTest, BertPretrainingAndQuestionAnsweringReplayEqualTheEagerStep) {
  for (const char* task : {"pretraining", "question-answering"}) {
    SCOPED_TRACE(task);
    ModelOptions m = BertTinyClassifier(/*dropout=*/0.0f);
    m.task = task;
    Build(m);
    ExpectReplayEqualsEager("bert-tiny");
  }
}

// With dropout, a captured step would replay the first step's masks: refused,
// naming the flag.
TEST_F(StepGraphTest, BertWithDropoutIsRefused) {
  Build(BertTinyClassifier(/*dropout=*/0.1f));
  StatusOr<std::unique_ptr<StepGraph>> graph = Graph("bert-tiny");
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().message().find("--cuda-graphs with --model bert-tiny: its dropout masks"),
            std::string::npos)
      << graph.status().message();
  EXPECT_NE(graph.status().message().find("--dropout 0"), std::string::npos);
}

}  // namespace
}  // namespace ddp
