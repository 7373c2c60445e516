#include "runtime/ops/reduce.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

TEST(ReduceTest, SumsAreExactForIntegers) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  // Large enough to take the parallel path; integer values make sums exact.
  const int64_t n = (1 << 18) + 7;
  Tensor x = Tensor::Empty({n}, DType::kF32);
  double expected_sum = 0.0, expected_squares = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((i % 13) - 6);
    x.data<float>()[i] = v;
    expected_sum += v;
    expected_squares += static_cast<double>(v) * v;
  }
  EXPECT_EQ(Sum(ctx, x), expected_sum);
  EXPECT_EQ(SumOfSquares(ctx, x), expected_squares);
}

TEST(ReduceTest, SumOfSquaresMatchesFloat64) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(1);
  const std::vector<double> v = testing::RandomValues(1000, rng);
  double expected = 0.0;
  for (double d : v) expected += d * d;
  EXPECT_NEAR(SumOfSquares(ctx, testing::ToF32Tensor(v, {10, 100})), expected, 1e-12 * expected);
}

TEST(ReduceTest, AllFiniteFindsInfAndNaN) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  Tensor x = Tensor::Zeros({100000}, DType::kF32);
  EXPECT_TRUE(AllFinite(ctx, x));
  x.data<float>()[99999] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(AllFinite(ctx, x));
  x.data<float>()[99999] = 0.0f;
  x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(AllFinite(ctx, x));
}

}  // namespace
}  // namespace ddp
