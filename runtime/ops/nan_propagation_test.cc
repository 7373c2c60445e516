// NaN and Inf propagate through every CPU op as they do in PyTorch: one bad
// pixel must show up in the loss, never be silently mapped to a finite value
// that then corrupts the weights while the printed loss stays finite.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/reduce.h"

namespace ddp {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// 0.5, 0.25, ... (finite, non-zero) with x[bad] replaced by `bad_value`.
Tensor Filled(const Shape& shape, int64_t bad, float bad_value) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = 0.25f + 0.125f * static_cast<float>(i % 7) - 0.5f * (i % 2);
  if (bad >= 0) d[bad] = bad_value;
  return t;
}

int64_t CountNaN(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t.data<float>()[i]);
  return n;
}

TEST(NanPropagationTest, Relu) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor x = Tensor::FromVector<float>({kNaN, -kInf, kInf, -1.0f, 2.0f}, {5});
  Tensor y = Tensor::Empty({5}, DType::kF32);
  ReluForward(ctx, x, y);
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_EQ(y.data<float>()[2], kInf);
  EXPECT_EQ(y.data<float>()[3], 0.0f);
  EXPECT_EQ(y.data<float>()[4], 2.0f);
  // torch.relu's backward (threshold_backward) passes dy where y is NaN.
  Tensor dy = Tensor::FromVector<float>({3.0f, 3.0f, 3.0f, 3.0f, kNaN}, {5});
  Tensor dx = Tensor::Empty({5}, DType::kF32);
  ReluBackward(ctx, y, dy, dx);
  EXPECT_EQ(dx.data<float>()[0], 3.0f);
  EXPECT_EQ(dx.data<float>()[1], 0.0f);
  EXPECT_EQ(dx.data<float>()[2], 3.0f);
  EXPECT_EQ(dx.data<float>()[3], 0.0f);
  EXPECT_TRUE(std::isnan(dx.data<float>()[4]));
  // In place, as the ReLU layer runs it, over the parallel threshold.
  Tensor big = Filled({1 << 16}, 12345, kNaN);
  ReluForward(ctx, big, big);
  EXPECT_EQ(CountNaN(big), 1);
}

TEST(NanPropagationTest, Conv2dSpreadsOverTheWindowsThatSeeIt) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  // One NaN pixel in channel 0 at (3, 3) of an 8x8 image, 3x3 kernel: the
  // 3x3 outputs around it are NaN in every output channel, nothing else.
  Tensor x = Filled({1, 2, 8, 8}, 3 * 8 + 3, kNaN);
  Tensor w = Filled({4, 2, 3, 3}, -1, 0.0f);
  Tensor y = Tensor::Empty({1, 4, 8, 8}, DType::kF32);
  Conv2dForward(ctx, p, x, w, nullptr, y);
  EXPECT_EQ(CountNaN(y), 4 * 9);
  for (int64_t c = 0; c < 4; ++c) EXPECT_TRUE(std::isnan(y.data<float>()[c * 64 + 2 * 8 + 4]));
  // The weight gradient sees the NaN input through every tap.
  Tensor dy = Filled({1, 4, 8, 8}, -1, 0.0f);
  Tensor dw = Tensor::Empty({4, 2, 3, 3}, DType::kF32);
  Conv2dBackwardWeights(ctx, p, x, dy, dw, nullptr);
  EXPECT_EQ(CountNaN(dw), 4 * 9);  // channel 0's taps of every filter
}

TEST(NanPropagationTest, BatchNormPoisonsTheChannel) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor x = Filled({2, 3, 4, 4}, 16 + 5, kNaN);  // sample 0, channel 1
  Tensor gamma = Filled({3}, -1, 0.0f), beta = Filled({3}, -1, 0.0f);
  Tensor y = Tensor::Empty(x.shape(), DType::kF32);
  Tensor mean = Tensor::Empty({3}, DType::kF32), invstd = Tensor::Empty({3}, DType::kF32);
  Tensor running_mean = Tensor::Zeros({3}, DType::kF32), running_var = Tensor::Zeros({3}, DType::kF32);
  BatchNormForwardTraining(ctx, BatchNormParams(), x, gamma, beta, y, mean, invstd, running_mean, running_var);
  EXPECT_EQ(CountNaN(y), 2 * 16);  // every value of channel 1
  EXPECT_TRUE(std::isnan(running_mean.data<float>()[1]));
  EXPECT_FALSE(std::isnan(running_mean.data<float>()[0]));
}

TEST(NanPropagationTest, Pooling) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Pool2dParams p;
  p.kernel_h = p.kernel_w = 2;
  p.stride_h = p.stride_w = 2;
  for (float bad : {kNaN, kInf}) {
    Tensor x = Filled({1, 1, 4, 4}, 5, bad);
    Tensor y = Tensor::Empty({1, 1, 2, 2}, DType::kF32), argmax = Tensor::Empty({1, 1, 2, 2}, DType::kI32);
    MaxPool2dForward(ctx, p, x, y, argmax);
    EXPECT_EQ(std::isnan(y.data<float>()[0]), std::isnan(bad));
    if (!std::isnan(bad)) {
      EXPECT_EQ(y.data<float>()[0], kInf);
    }
    EXPECT_EQ(argmax.data<int32_t>()[0], 5);
    AvgPool2dForward(ctx, p, x, y);
    EXPECT_EQ(std::isnan(y.data<float>()[0]), std::isnan(bad));
    EXPECT_FALSE(std::isnan(y.data<float>()[3]) || std::isinf(y.data<float>()[3]));
  }
  Tensor x = Filled({2, 3, 4, 4}, 16 * 4, kNaN);  // sample 1, channel 1
  Tensor y = Tensor::Empty({2, 3}, DType::kF32);
  GlobalAvgPoolForward(ctx, x, y);
  EXPECT_EQ(CountNaN(y), 1);
  EXPECT_TRUE(std::isnan(y.data<float>()[4]));
}

TEST(NanPropagationTest, LinearLossAndReductions) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor x = Filled({3, 5}, 7, kNaN);  // sample 1
  Tensor w = Filled({4, 5}, -1, 0.0f);
  Tensor y = Tensor::Empty({3, 4}, DType::kF32);
  LinearForward(ctx, x, w, nullptr, y);
  EXPECT_EQ(CountNaN(y), 4);
  Tensor labels = Tensor::FromVector<int64_t>({0, 1, 2}, {3});
  Tensor probs = Tensor::Empty({3, 4}, DType::kF32);
  EXPECT_TRUE(std::isnan(SoftmaxCrossEntropyForward(ctx, CrossEntropyParams(), y, labels, probs).loss));
  EXPECT_TRUE(std::isnan(Sum(ctx, y)));
  EXPECT_TRUE(std::isnan(SumOfSquares(ctx, y)));
  EXPECT_FALSE(AllFinite(ctx, y));
}

}  // namespace
}  // namespace ddp
