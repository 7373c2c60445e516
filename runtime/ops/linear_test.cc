#include "runtime/ops/linear.h"

#include <cmath>

#include <gtest/gtest.h>

#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

struct LinearCase {
  int64_t n, in, out;
  bool bias;
};

void PrintTo(const LinearCase& c, std::ostream* os) {
  *os << c.n << "x" << c.in << "->" << c.out << (c.bias ? "+bias" : "");
}

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesFloat64ReferenceForwardAndBackward) {
  const LinearCase& c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(11);
  const Shape xs = {c.n, c.in}, ws = {c.out, c.in}, ys = {c.n, c.out};
  const Vec x = RandomValues(NumElements(xs), rng), w = RandomValues(NumElements(ws), rng);
  const Vec b = c.bias ? RandomValues(c.out, rng) : Vec{};
  Tensor xt = ToF32Tensor(x, xs), wt = ToF32Tensor(w, ws), bt = c.bias ? ToF32Tensor(b, {c.out}) : Tensor();
  Tensor y = Tensor::Empty(ys, DType::kF32);
  LinearForward(ctx, xt, wt, c.bias ? &bt : nullptr, y);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), testing::RefLinear(x, xs, w, ws, b), 1e-5, 1e-5));

  const Vec dy = RandomValues(NumElements(ys), rng);
  Tensor dyt = ToF32Tensor(dy, ys);
  Tensor dx = Tensor::Empty(xs, DType::kF32), dw = Tensor::Empty(ws, DType::kF32);
  Tensor db = c.bias ? Tensor::Empty({c.out}, DType::kF32) : Tensor();
  LinearBackwardData(ctx, dyt, wt, &dx);
  LinearBackwardWeights(ctx, xt, dyt, dw, c.bias ? &db : nullptr);
  auto reference = [&](const std::vector<Vec>& in) {
    return testing::RefLinear(in[0], xs, in[1], ws, c.bias ? in[2] : Vec{});
  };
  std::vector<Vec> inputs = {x, w}, grads = {ToDoubles(dx), ToDoubles(dw)};
  if (c.bias) {
    inputs.push_back(b);
    grads.push_back(ToDoubles(db));
  }
  EXPECT_TRUE(testing::GradientChecker().Check(reference, inputs, dy, grads));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(LinearCase{5, 7, 3, true}, LinearCase{1, 1, 1, false},
                                           LinearCase{33, 65, 17, true}, LinearCase{8, 128, 10, false}));

TEST(GemmTest, AllTransposesAgainstNaiveFloat64WithBeta) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(12);
  const int64_t m = 13, n = 9, k = 21;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
      const Vec a = RandomValues(m * k, rng), b = RandomValues(k * n, rng), c0 = RandomValues(m * n, rng);
      Tensor ct = ToF32Tensor(c0, {m, n});
      Gemm(ctx, ta, tb, 0.5f, ToF32Tensor(a, as), ToF32Tensor(b, bs), 2.0f, ct);
      Vec expected(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (int64_t l = 0; l < k; ++l) acc += (ta ? a[l * m + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * n + j]);
          expected[i * n + j] = 0.5 * acc + 2.0 * c0[i * n + j];
        }
      EXPECT_TRUE(testing::AllClose(ToDoubles(ct), expected, 1e-5, 1e-5)) << "ta " << ta << " tb " << tb;
    }
  }
}

// Each matrix of the batch against float64, for every transpose, with
// alpha and beta: attention's products.
TEST(BatchedGemmTest, EachMatrixAgainstFloat64) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(31);
  const int64_t batch = 3, m = 4, n = 5, k = 6;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(std::string(ta ? "A^T" : "A") + (tb ? " B^T" : " B"));
      const Vec a = RandomValues(batch * m * k, rng), b = RandomValues(batch * k * n, rng);
      const Vec c0 = RandomValues(batch * m * n, rng);
      Tensor c = ToF32Tensor(c0, {batch, m, n});
      const float alpha = 0.125f, beta = 0.5f;
      BatchedGemm(ctx, ta, tb, alpha, ToF32Tensor(a, ta ? Shape{batch, k, m} : Shape{batch, m, k}),
                  ToF32Tensor(b, tb ? Shape{batch, n, k} : Shape{batch, k, n}), beta, c);
      Vec expected(batch * m * n);
      for (int64_t i = 0; i < batch; ++i) {
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t col = 0; col < n; ++col) {
            double sum = 0.0;
            for (int64_t x = 0; x < k; ++x) {
              const double av = ta ? a[i * m * k + x * m + r] : a[i * m * k + r * k + x];
              const double bv = tb ? b[i * k * n + col * k + x] : b[i * k * n + x * n + col];
              sum += av * bv;
            }
            const int64_t at = i * m * n + r * n + col;
            expected[at] = alpha * sum + beta * c0[at];
          }
        }
      }
      EXPECT_TRUE(testing::AllClose(ToDoubles(c), expected, 1e-5, 1e-6));
    }
  }
}

// beta = 0 writes C without reading it (a NaN there stays out), and alpha =
// 1 takes no scale: attention's forward products.
TEST(BatchedGemmTest, BetaZeroIgnoresTheOldC) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(37);
  const int64_t batch = 2, m = 3, n = 2, k = 4;
  const Vec a = RandomValues(batch * m * k, rng), b = RandomValues(batch * k * n, rng);
  Tensor c = ToF32Tensor(Vec(batch * m * n, std::nan("")), {batch, m, n});
  BatchedGemm(ctx, false, false, 1.0f, ToF32Tensor(a, {batch, m, k}), ToF32Tensor(b, {batch, k, n}), 0.0f, c);
  Vec expected(batch * m * n, 0.0);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t col = 0; col < n; ++col) {
        for (int64_t x = 0; x < k; ++x) {
          expected[i * m * n + r * n + col] += a[i * m * k + r * k + x] * b[i * k * n + x * n + col];
        }
      }
    }
  }
  EXPECT_TRUE(testing::AllClose(ToDoubles(c), expected, 1e-5, 1e-6));
}

}  // namespace
}  // namespace ddp
