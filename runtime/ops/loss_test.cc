#include "runtime/ops/loss.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

struct LossCase {
  int64_t n, c;
  double smoothing;
  std::vector<int64_t> labels;
};

void PrintTo(const LossCase& c, std::ostream* os) { *os << c.n << "x" << c.c << " smoothing " << c.smoothing; }

class CrossEntropyTest : public ::testing::TestWithParam<LossCase> {};

TEST_P(CrossEntropyTest, MatchesFloat64ReferenceForwardAndBackward) {
  const LossCase& c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::mt19937_64 rng(21);
  const Vec logits = RandomValues(c.n * c.c, rng, -4.0, 4.0);
  CrossEntropyParams p;
  p.label_smoothing = c.smoothing;
  Tensor labels = Tensor::FromVector<int64_t>(c.labels, {c.n});
  Tensor probs = Tensor::Empty({c.n, c.c}, DType::kF32);
  const CrossEntropyResult r = SoftmaxCrossEntropyForward(ctx, p, ToF32Tensor(logits, {c.n, c.c}), labels, probs);
  const Vec ref = testing::RefCrossEntropy(logits, c.n, c.c, c.labels, c.smoothing, p.ignore_index);
  EXPECT_NEAR(r.loss, ref[0], 1e-6 * std::fabs(ref[0]));
  int64_t counted = 0;
  for (int64_t l : c.labels) counted += l != p.ignore_index;
  EXPECT_EQ(r.counted, counted);
  // Each row of probs is a distribution.
  for (int64_t i = 0; i < c.n; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < c.c; ++j) row += probs.data<float>()[i * c.c + j];
    EXPECT_NEAR(row, 1.0, 1e-6);
  }

  const double loss_grad = 0.75;
  Tensor dlogits = Tensor::Empty({c.n, c.c}, DType::kF32);
  SoftmaxCrossEntropyBackward(ctx, p, probs, labels, loss_grad, dlogits);
  auto reference = [&](const std::vector<Vec>& in) {
    return testing::RefCrossEntropy(in[0], c.n, c.c, c.labels, c.smoothing, p.ignore_index);
  };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {logits}, {loss_grad}, {ToDoubles(dlogits)}));
}

INSTANTIATE_TEST_SUITE_P(Cases, CrossEntropyTest,
                         ::testing::Values(LossCase{4, 5, 0.0, {0, 4, 2, 2}}, LossCase{4, 5, 0.1, {1, 3, 0, 4}},
                                           LossCase{5, 3, 0.2, {2, -100, 0, -100, 1}},
                                           LossCase{1, 1000, 0.1, {999}}));

TEST(CrossEntropyTest, AllIgnoredGivesNaNAndZeroGradient) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor logits = Tensor::Zeros({2, 3}, DType::kF32), probs = Tensor::Empty({2, 3}, DType::kF32);
  Tensor labels = Tensor::FromVector<int64_t>({-100, -100}, {2});
  const CrossEntropyResult r = SoftmaxCrossEntropyForward(ctx, CrossEntropyParams(), logits, labels, probs);
  EXPECT_TRUE(std::isnan(r.loss));
  EXPECT_EQ(r.counted, 0);
  Tensor d = Tensor::Empty({2, 3}, DType::kF32);
  SoftmaxCrossEntropyBackward(ctx, CrossEntropyParams(), probs, labels, 1.0, d);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(d.data<float>()[i], 0.0f);
}

TEST(CrossEntropyTest, UniformLogitsGiveLogC) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor logits = Tensor::Zeros({3, 10}, DType::kF32), probs = Tensor::Empty({3, 10}, DType::kF32);
  Tensor labels = Tensor::FromVector<int64_t>({1, 2, 3}, {3});
  EXPECT_NEAR(SoftmaxCrossEntropyForward(ctx, CrossEntropyParams(), logits, labels, probs).loss, std::log(10.0),
              1e-12);
}

TEST(CrossEntropyDeathTest, LabelOutOfRangeIsNamed) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor logits = Tensor::Zeros({2, 3}, DType::kF32), probs = Tensor::Empty({2, 3}, DType::kF32);
  Tensor labels = Tensor::FromVector<int64_t>({0, 3}, {2});
  EXPECT_DEATH(SoftmaxCrossEntropyForward(ctx, CrossEntropyParams(), logits, labels, probs),
               "label 3 of sample 1 is outside \\[0, 3\\)");
}

}  // namespace
}  // namespace ddp
