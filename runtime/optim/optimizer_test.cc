#include "runtime/optim/optimizer.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using Vec = std::vector<double>;

// torch.optim.SGD's update, written out in float64 from its documentation.
struct ReferenceSgd {
  double lr, momentum, wd;
  bool nesterov;
  Vec buf;
  bool first = true;
  void Step(Vec& w, const Vec& g) {
    if (buf.empty()) buf.assign(w.size(), 0.0);
    for (size_t i = 0; i < w.size(); ++i) {
      double d = g[i] + wd * w[i];
      if (momentum != 0.0) {
        buf[i] = first ? d : momentum * buf[i] + d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
    first = false;
  }
};

struct SgdCase {
  double momentum, wd;
  bool nesterov;
};

class SgdTest : public ::testing::TestWithParam<SgdCase> {};

TEST_P(SgdTest, ThreeStepsMatchTorchFormula) {
  const SgdCase c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(1);
  const int64_t n = 100003;  // takes the parallel path
  Vec w = testing::RandomValues(n, rng);
  Tensor wt = testing::ToF32Tensor(w, {n}), gt = Tensor::Empty({n}, DType::kF32);
  SgdOptions options;
  options.momentum = static_cast<float>(c.momentum);
  options.nesterov = c.nesterov;
  std::unique_ptr<Optimizer> sgd = MakeSgd({{"w", wt, gt, static_cast<float>(c.wd)}}, options);
  ReferenceSgd ref{0.1, c.momentum, c.wd, c.nesterov, {}};
  for (int step = 0; step < 3; ++step) {
    const Vec g = testing::RandomValues(n, rng);
    gt.CopyFrom(testing::ToF32Tensor(g, {n}));
    sgd->Step(ctx, 0.1f);
    ref.Step(w, g);
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(wt), w, 1e-5, 1e-6));
  EXPECT_EQ(sgd->state_bytes(), c.momentum != 0.0 ? n * 4 : 0);
}

INSTANTIATE_TEST_SUITE_P(Options, SgdTest,
                         ::testing::Values(SgdCase{0.9, 0.0, false}, SgdCase{0.9, 1e-2, false},
                                           SgdCase{0.9, 5e-3, true}, SgdCase{0.0, 1e-2, false}));

TEST(AdamWTest, ThreeStepsMatchTorchFormula) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(2);
  const int64_t n = 1000;
  Vec w = testing::RandomValues(n, rng);
  Tensor wt = testing::ToF32Tensor(w, {n}), gt = Tensor::Empty({n}, DType::kF32);
  std::unique_ptr<Optimizer> adamw = MakeAdamW({{"w", wt, gt, 0.01f}}, AdamWOptions());
  Vec m(n, 0.0), v(n, 0.0);
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  for (int step = 1; step <= 3; ++step) {
    const Vec g = testing::RandomValues(n, rng);
    gt.CopyFrom(testing::ToF32Tensor(g, {n}));
    adamw->Step(ctx, static_cast<float>(lr));
    for (int64_t i = 0; i < n; ++i) {
      w[i] *= 1.0 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
      w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(wt), w, 1e-5, 1e-7));
  EXPECT_EQ(adamw->state_bytes(), 2 * n * 4);
}

TEST(ClipTest, ScalesOnlyAboveTheLimit) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor a = Tensor::FromVector<float>({3.0f, 0.0f}, {2}), b = Tensor::FromVector<float>({0.0f, 4.0f}, {2});
  const double norm = std::sqrt(GradientSquaredNorm(ctx, {a, b}));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_EQ(ClipGradientsToNorm(ctx, {a, b}, norm, 10.0), 1.0f);
  EXPECT_EQ(a.data<float>()[0], 3.0f);
  const float coef = ClipGradientsToNorm(ctx, {a, b}, norm, 1.0);
  EXPECT_NEAR(coef, 1.0 / (5.0 + 1e-6), 1e-7);
  EXPECT_NEAR(a.data<float>()[0], 3.0 * coef, 1e-6);
  EXPECT_NEAR(b.data<float>()[1], 4.0 * coef, 1e-6);
}

}  // namespace
}  // namespace ddp
