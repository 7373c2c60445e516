#include "runtime/ops/elementwise.h"

#include <gtest/gtest.h>

#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

// Sizes around the parallel threshold and not multiples of a vector width.
class ElementwiseTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ElementwiseTest, ArithmeticMatchesFloat64) {
  const int64_t n = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(n);
  const Vec a = RandomValues(n, rng), b = RandomValues(n, rng);
  Tensor out = Tensor::Empty({n}, DType::kF32);
  Add(ctx, ToF32Tensor(a, {n}), ToF32Tensor(b, {n}), out);
  EXPECT_TRUE(testing::AllClose(ToDoubles(out), testing::RefAdd(a, b), 1e-7, 0.0));

  Tensor y = ToF32Tensor(b, {n});
  Axpy(ctx, 0.25f, ToF32Tensor(a, {n}), y);
  Vec expected(n);
  for (int64_t i = 0; i < n; ++i) expected[i] = b[i] + 0.25 * a[i];
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), expected, 1e-7, 1e-7));

  Scale(ctx, -3.0f, y);
  for (int64_t i = 0; i < n; ++i) expected[i] *= -3.0;
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), expected, 1e-6, 1e-6));
}

TEST_P(ElementwiseTest, ReluForwardAndBackward) {
  const int64_t n = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(n + 1);
  Vec x = RandomValues(n, rng);
  for (double& v : x) v += v >= 0 ? 0.01 : -0.01;  // away from the kink
  x = ToDoubles(ToF32Tensor(x, {n}));
  Tensor y = Tensor::Empty({n}, DType::kF32);
  ReluForward(ctx, ToF32Tensor(x, {n}), y);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), testing::RefRelu(x), 0.0, 0.0));
  const Vec dy = RandomValues(n, rng);
  Tensor dx = Tensor::Empty({n}, DType::kF32);
  ReluBackward(ctx, y, ToF32Tensor(dy, {n}), dx);
  auto reference = [](const std::vector<Vec>& in) { return testing::RefRelu(in[0]); };
  if (n <= 4096) {  // finite differences cost two reference calls per element
    EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}));
  }
  // In place, as layers use it.
  Tensor inplace = ToF32Tensor(x, {n});
  ReluForward(ctx, inplace, inplace);
  EXPECT_TRUE(testing::AllClose(ToDoubles(inplace), ToDoubles(y), 0.0, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseTest, ::testing::Values(1, 17, 4096, (1 << 15) + 3, 100003));

}  // namespace
}  // namespace ddp
