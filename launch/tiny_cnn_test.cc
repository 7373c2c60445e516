// End to end through every CPU op: the tiny CNN learns the synthetic set.
#include "launch/tiny_cnn.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/data/synthetic_images.h"

namespace ddp {
namespace {

TEST(TinyCnnTest, LearnsSyntheticImagesToHighHeldOutAccuracy) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  SyntheticImagesConfig data_config;
  data_config.image_size = 16;
  SyntheticImages data(data_config);
  TinyCnn model(TinyCnnConfig(), /*seed=*/3);
  const int64_t batch = 32;
  Tensor images = Tensor::Empty({batch, 3, 16, 16}, DType::kF32), labels = Tensor::Empty({batch}, DType::kI64);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 40; ++step) {
    data.FillRange(step * batch, images, labels);
    const double loss = model.ForwardBackward(ctx, images, labels);
    model.SgdStep(ctx, 0.05f, 0.9f, 0.0f);
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(10.0), 0.5);  // near chance at the start
  EXPECT_LT(last, 0.25 * first);
  // Held-out samples (indices never trained on), BN in eval mode.
  const int64_t eval = 200;
  Tensor eval_images = Tensor::Empty({eval, 3, 16, 16}, DType::kF32), eval_labels = Tensor::Empty({eval}, DType::kI64);
  data.FillRange(1000000, eval_images, eval_labels);
  Tensor logits = model.Predict(ctx, eval_images);
  int correct = 0;
  for (int64_t i = 0; i < eval; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < 10; ++c) {
      if (logits.data<float>()[i * 10 + c] > logits.data<float>()[i * 10 + best]) best = c;
    }
    correct += best == eval_labels.data<int64_t>()[i];
  }
  EXPECT_GE(correct, 0.95 * eval) << correct << " of " << eval;
}

}  // namespace
}  // namespace ddp
