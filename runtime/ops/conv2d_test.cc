#include "runtime/ops/conv2d.h"

#include <gtest/gtest.h>

#include "runtime/testing/op_cases.h"
#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

using testing::ConvCase;

class Conv2dTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dTest, MatchesFloat64ReferenceForwardAndBackward) {
  const ConvCase& c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(42);
  const Vec x = RandomValues(NumElements(c.x), rng);
  const Vec w = RandomValues(NumElements(c.w), rng);
  const Vec b = c.bias ? RandomValues(c.w[0], rng) : Vec{};
  testing::RefConv2dParams rp{c.p.stride_h, c.p.stride_w, c.p.pad_h, c.p.pad_w,
                              c.p.dilation_h, c.p.dilation_w, c.p.groups};
  auto reference = [&](const std::vector<Vec>& in) {
    Shape ys;
    return testing::RefConv2d(in[0], c.x, in[1], c.w, c.bias ? in[2] : Vec{}, rp, &ys);
  };
  Shape ref_shape;
  const Vec y_ref = testing::RefConv2d(x, c.x, w, c.w, b, rp, &ref_shape);

  Tensor xt = ToF32Tensor(x, c.x), wt = ToF32Tensor(w, c.w), bt = c.bias ? ToF32Tensor(b, {c.w[0]}) : Tensor();
  const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
  ASSERT_EQ(ys, ref_shape);
  Tensor yt = Tensor::Empty(ys, DType::kF32);
  Conv2dForward(ctx, c.p, xt, wt, c.bias ? &bt : nullptr, yt);
  EXPECT_TRUE(testing::AllClose(ToDoubles(yt), y_ref, 1e-5, 1e-5));

  const Vec dy = RandomValues(NumElements(ys), rng);
  Tensor dyt = ToF32Tensor(dy, ys);
  Tensor dxt = Tensor::Empty(c.x, DType::kF32), dwt = Tensor::Empty(c.w, DType::kF32);
  Tensor dbt = c.bias ? Tensor::Empty({c.w[0]}, DType::kF32) : Tensor();
  Conv2dBackwardData(ctx, c.p, dyt, wt, dxt);
  Conv2dBackwardWeights(ctx, c.p, xt, dyt, dwt, c.bias ? &dbt : nullptr);
  std::vector<Vec> inputs = {x, w};
  std::vector<Vec> grads = {ToDoubles(dxt), ToDoubles(dwt)};
  if (c.bias) {
    inputs.push_back(b);
    grads.push_back(ToDoubles(dbt));
  }
  EXPECT_TRUE(testing::GradientChecker().Check(reference, inputs, dy, grads));
}

Conv2dParams P(int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  return testing::ConvParams(stride, pad, dilation, groups);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dTest, ::testing::ValuesIn(testing::ConvCases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

TEST(Conv2dShapeTest, OutputShapeFollowsPyTorchFloor) {
  EXPECT_EQ(Conv2dOutputShape({8, 3, 224, 224}, {64, 3, 7, 7}, P(2, 3)), (Shape{8, 64, 112, 112}));
  EXPECT_EQ(Conv2dOutputShape({1, 3, 8, 8}, {5, 3, 3, 3}, P(2, 0)), (Shape{1, 5, 3, 3}));
  EXPECT_EQ(Conv2dOutputShape({1, 2, 9, 9}, {3, 2, 3, 3}, P(1, 2, 2)), (Shape{1, 3, 9, 9}));
}

TEST(Conv2dDeathTest, MismatchedChannelsAreNamed) {
  EXPECT_DEATH(Conv2dOutputShape({1, 3, 8, 8}, {4, 2, 3, 3}, P(1, 1)), "do not match input");
}

TEST(Conv2dDeathTest, KernelLargerThanThePaddedInputIsRejected) {
  // (2 - 3) / 2 + 1 truncates to 1: the check must come before the division,
  // as PyTorch's "Kernel size can't be greater than actual input size".
  EXPECT_DEATH(Conv2dOutputShape({1, 3, 2, 2}, {4, 3, 3, 3}, P(2, 0)), "larger than padded input");
  EXPECT_EQ(Conv2dOutputShape({1, 3, 1, 1}, {4, 3, 3, 3}, P(2, 1)), (Shape{1, 4, 1, 1}));
}

}  // namespace
}  // namespace ddp
