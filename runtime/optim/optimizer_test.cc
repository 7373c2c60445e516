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
    ASSERT_TRUE(sgd->Step(ctx, 0.1f).ok());
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
    ASSERT_TRUE(adamw->Step(ctx, static_cast<float>(lr)).ok());
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

// LAMB from its definition, in float64, for whole parameters.
struct ReferenceLamb {
  double b1 = 0.9, b2 = 0.999, eps = 1e-6;
  std::vector<Vec> m, v;
  int t = 0;
  void Step(std::vector<Vec>& ws, const std::vector<Vec>& gs, const std::vector<double>& wds, double lr) {
    if (m.empty()) {
      for (const Vec& w : ws) {
        m.emplace_back(w.size(), 0.0);
        v.emplace_back(w.size(), 0.0);
      }
    }
    ++t;
    for (size_t p = 0; p < ws.size(); ++p) {
      Vec u(ws[p].size());
      double wn = 0.0, un = 0.0;
      for (size_t i = 0; i < u.size(); ++i) {
        m[p][i] = b1 * m[p][i] + (1 - b1) * gs[p][i];
        v[p][i] = b2 * v[p][i] + (1 - b2) * gs[p][i] * gs[p][i];
        u[i] = (m[p][i] / (1 - std::pow(b1, t))) / (std::sqrt(v[p][i] / (1 - std::pow(b2, t))) + eps) +
               wds[p] * ws[p][i];
        wn += ws[p][i] * ws[p][i];
        un += u[i] * u[i];
      }
      const double ratio = wn > 0 && un > 0 ? std::sqrt(wn) / std::sqrt(un) : 1.0;
      for (size_t i = 0; i < u.size(); ++i) ws[p][i] -= lr * ratio * u[i];
    }
  }
};

TEST(LambTest, ThreeStepsMatchTheDefinitionAlsoWhenParametersAreSplitIntoPieces) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(4);
  const int64_t n0 = 1000, n1 = 70001;
  std::vector<Vec> ws = {testing::RandomValues(n0, rng), testing::RandomValues(n1, rng)};
  const std::vector<double> wds = {0.01, 0.0};
  // Whole parameters, and the same parameters cut into pieces as ZeRO
  // shards would (the second across three slots).
  Tensor w0 = testing::ToF32Tensor(ws[0], {n0}), w1 = testing::ToF32Tensor(ws[1], {n1});
  Tensor g0 = Tensor::Empty({n0}, DType::kF32), g1 = Tensor::Empty({n1}, DType::kF32);
  Tensor pw0 = w0.Clone(), pw1 = w1.Clone();
  Tensor pg0 = Tensor::Empty({n0}, DType::kF32), pg1 = Tensor::Empty({n1}, DType::kF32);
  std::unique_ptr<Optimizer> whole =
      MakeLamb({{"a", w0, g0, 0.01f, 0}, {"b", w1, g1, 0.0f, 1}}, LambOptions(), 2);
  std::unique_ptr<Optimizer> pieces = MakeLamb({{"a", pw0, pg0, 0.01f, 0},
                                                {"b", pw1.View(0, {100}), pg1.View(0, {100}), 0.0f, 1},
                                                {"b", pw1.View(100, {50000}), pg1.View(100, {50000}), 0.0f, 1},
                                                {"b", pw1.View(50100, {n1 - 50100}), pg1.View(50100, {n1 - 50100}),
                                                 0.0f, 1}},
                                               LambOptions(), 2);
  ReferenceLamb ref;
  for (int step = 0; step < 3; ++step) {
    std::vector<Vec> gs = {testing::RandomValues(n0, rng), testing::RandomValues(n1, rng)};
    g0.CopyFrom(testing::ToF32Tensor(gs[0], {n0}));
    g1.CopyFrom(testing::ToF32Tensor(gs[1], {n1}));
    pg0.CopyFrom(g0);
    pg1.CopyFrom(g1);
    ASSERT_TRUE(whole->Step(ctx, 0.01f).ok());
    ASSERT_TRUE(pieces->Step(ctx, 0.01f).ok());
    ref.Step(ws, gs, wds, 0.01);
  }
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(w0), ws[0], 1e-5, 1e-6));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(w1), ws[1], 1e-5, 1e-6));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(pw0), testing::ToDoubles(w0), 1e-6, 1e-7));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(pw1), testing::ToDoubles(w1), 1e-6, 1e-7));
  EXPECT_EQ(whole->state_bytes(), 2 * (n0 + n1) * 4);
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
