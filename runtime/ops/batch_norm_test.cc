#include "runtime/ops/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

class BatchNormTest : public ::testing::TestWithParam<Shape> {};

TEST_P(BatchNormTest, TrainingMatchesFloat64ReferenceForwardAndBackward) {
  const Shape xs = GetParam();
  const int64_t c = xs[1];
  const double count = static_cast<double>(NumElements(xs) / c);
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(7);
  // An offset mean checks that the variance does not cancel.
  const Vec x = RandomValues(NumElements(xs), rng, 2.0, 5.0);
  const Vec gamma = RandomValues(c, rng, 0.5, 1.5), beta = RandomValues(c, rng);
  const Vec rm0 = RandomValues(c, rng), rv0 = RandomValues(c, rng, 0.5, 2.0);
  const BatchNormParams p;

  Tensor xt = ToF32Tensor(x, xs), gt = ToF32Tensor(gamma, {c}), bt = ToF32Tensor(beta, {c});
  Tensor rm = ToF32Tensor(rm0, {c}), rv = ToF32Tensor(rv0, {c});
  Tensor yt = Tensor::Empty(xs, DType::kF32), mean = Tensor::Empty({c}, DType::kF32),
         invstd = Tensor::Empty({c}, DType::kF32);
  BatchNormForwardTraining(ctx, p, xt, gt, bt, yt, mean, invstd, rm, rv);

  Vec ref_mean, ref_var;
  const Vec y_ref = testing::RefBatchNormTraining(x, xs, gamma, beta, p.eps, &ref_mean, &ref_var);
  EXPECT_TRUE(testing::AllClose(ToDoubles(yt), y_ref, 1e-5, 1e-5));
  EXPECT_TRUE(testing::AllClose(ToDoubles(mean), ref_mean, 1e-6, 1e-6));
  Vec ref_invstd(c), ref_rm(c), ref_rv(c);
  for (int64_t i = 0; i < c; ++i) {
    ref_invstd[i] = 1.0 / std::sqrt(ref_var[i] + p.eps);
    ref_rm[i] = 0.9 * rm0[i] + 0.1 * ref_mean[i];
    ref_rv[i] = 0.9 * rv0[i] + 0.1 * ref_var[i] * count / (count - 1.0);  // unbiased, as PyTorch
  }
  EXPECT_TRUE(testing::AllClose(ToDoubles(invstd), ref_invstd, 1e-5, 1e-6));
  EXPECT_TRUE(testing::AllClose(ToDoubles(rm), ref_rm, 1e-6, 1e-6));
  EXPECT_TRUE(testing::AllClose(ToDoubles(rv), ref_rv, 1e-5, 1e-6));

  const Vec dy = RandomValues(NumElements(xs), rng);
  Tensor dx = Tensor::Empty(xs, DType::kF32), dgamma = Tensor::Empty({c}, DType::kF32),
         dbeta = Tensor::Empty({c}, DType::kF32);
  BatchNormBackward(ctx, BatchNormParams(), xt, ToF32Tensor(dy, xs), gt, mean, invstd, dx, dgamma, dbeta);
  auto reference = [&](const std::vector<Vec>& in) {
    return testing::RefBatchNormTraining(in[0], xs, in[1], in[2], p.eps);
  };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x, gamma, beta}, dy,
                                               {ToDoubles(dx), ToDoubles(dgamma), ToDoubles(dbeta)}));
}

TEST_P(BatchNormTest, InferenceUsesRunningStatistics) {
  const Shape xs = GetParam();
  const int64_t c = xs[1];
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(8);
  const Vec x = RandomValues(NumElements(xs), rng), gamma = RandomValues(c, rng), beta = RandomValues(c, rng);
  const Vec rm = RandomValues(c, rng), rv = RandomValues(c, rng, 0.1, 3.0);
  Tensor yt = Tensor::Empty(xs, DType::kF32);
  BatchNormForwardInference(ctx, BatchNormParams(), ToF32Tensor(x, xs), ToF32Tensor(gamma, {c}),
                            ToF32Tensor(beta, {c}), ToF32Tensor(rm, {c}), ToF32Tensor(rv, {c}), yt);
  EXPECT_TRUE(testing::AllClose(ToDoubles(yt), testing::RefBatchNormInference(x, xs, gamma, beta, rm, rv, 1e-5),
                                1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormTest,
                         ::testing::Values(Shape{4, 3, 5, 5}, Shape{8, 6}, Shape{2, 16, 3, 4}, Shape{3, 2, 1, 1}));

// The fused epilogues: y = relu?(bn(x) + residual?) against float64, and
// the backward (dx, dgamma, dbeta and the residual's gradient) against
// central differences of that reference.
struct EpilogueCase {
  bool residual, relu;
};

class BatchNormEpilogueTest : public ::testing::TestWithParam<std::tuple<Shape, EpilogueCase>> {};

TEST_P(BatchNormEpilogueTest, FusedMatchesFloat64ReferenceForwardAndBackward) {
  const auto [xs, e] = GetParam();
  const int64_t c = xs[1], n = NumElements(xs);
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(11);
  const Vec x = RandomValues(n, rng, -1.0, 3.0), r = RandomValues(n, rng, -2.0, 2.0);
  const Vec gamma = RandomValues(c, rng, 0.5, 1.5), beta = RandomValues(c, rng, -0.5, 0.5);
  const BatchNormParams p;
  auto reference = [&](const std::vector<Vec>& in) {
    Vec y = testing::RefBatchNormTraining(in[0], xs, in[1], in[2], p.eps);
    if (e.residual) {
      for (int64_t i = 0; i < n; ++i) y[i] += in[3][i];
    }
    return e.relu ? testing::RefRelu(y) : y;
  };
  Tensor xt = ToF32Tensor(x, xs), rt = ToF32Tensor(r, xs), gt = ToF32Tensor(gamma, {c}), bt = ToF32Tensor(beta, {c});
  Tensor rm = Tensor::Zeros({c}, DType::kF32), rv = Tensor::Zeros({c}, DType::kF32);
  Tensor yt = Tensor::Empty(xs, DType::kF32), mean = Tensor::Empty({c}, DType::kF32),
         invstd = Tensor::Empty({c}, DType::kF32);
  BatchNormForwardTraining(ctx, p, xt, gt, bt, yt, mean, invstd, rm, rv, {e.residual ? &rt : nullptr, e.relu});
  EXPECT_TRUE(testing::AllClose(ToDoubles(yt), reference({x, gamma, beta, r}), 1e-5, 1e-5));

  const Vec dy = RandomValues(n, rng);
  Tensor dyt = ToF32Tensor(dy, xs);
  Tensor dx = Tensor::Empty(xs, DType::kF32), dr = Tensor::Empty(xs, DType::kF32),
         dgamma = Tensor::Empty({c}, DType::kF32), dbeta = Tensor::Empty({c}, DType::kF32);
  BatchNormBackward(ctx, p, xt, dyt, gt, mean, invstd, dx, dgamma, dbeta,
                    {&yt, e.residual ? &dr : nullptr, e.relu});
  std::vector<Vec> analytic = {ToDoubles(dx), ToDoubles(dgamma), ToDoubles(dbeta)};
  if (e.residual) analytic.push_back(ToDoubles(dr));
  std::vector<Vec> inputs = {x, gamma, beta};
  if (e.residual) inputs.push_back(r);
  EXPECT_TRUE(testing::GradientChecker().Check(reference, inputs, dy, analytic));
  if (e.residual) {
    // The residual's gradient is dy masked by the output: exactly.
    const Vec y = ToDoubles(yt), d = ToDoubles(dr);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d[i], !e.relu || y[i] > 0.0 ? dy[i] : 0.0) << "element " << i;
  }

  // Inference takes the same epilogue.
  Tensor yi = Tensor::Empty(xs, DType::kF32);
  BatchNormForwardInference(ctx, p, xt, gt, bt, mean, invstd, yi, {e.residual ? &rt : nullptr, e.relu});
  Vec ref_i = testing::RefBatchNormInference(x, xs, gamma, beta, ToDoubles(mean), ToDoubles(invstd), p.eps);
  for (int64_t i = 0; i < n; ++i) {
    if (e.residual) ref_i[i] += r[i];
    if (e.relu) ref_i[i] = std::max(ref_i[i], 0.0);
  }
  EXPECT_TRUE(testing::AllClose(ToDoubles(yi), ref_i, 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Cases, BatchNormEpilogueTest,
                         ::testing::Combine(::testing::Values(Shape{4, 3, 5, 5}, Shape{8, 6}, Shape{2, 16, 3, 4}),
                                            ::testing::Values(EpilogueCase{false, true}, EpilogueCase{true, false},
                                                              EpilogueCase{true, true})));

TEST(BatchNormDeathTest, OneValuePerChannelIsRejectedInTraining) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor x = Tensor::Zeros({1, 2, 1, 1}, DType::kF32), y = Tensor::Empty({1, 2, 1, 1}, DType::kF32);
  Tensor c1 = Tensor::Zeros({2}, DType::kF32), c2 = c1.Clone(), c3 = c1.Clone(), c4 = c1.Clone(), c5 = c1.Clone(),
         c6 = c1.Clone();
  EXPECT_DEATH(BatchNormForwardTraining(ctx, BatchNormParams(), x, c1, c2, y, c3, c4, c5, c6),
               "more than one value per channel");
}

}  // namespace
}  // namespace ddp
