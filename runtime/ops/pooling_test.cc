#include "runtime/ops/pooling.h"

#include <gtest/gtest.h>

#include "runtime/testing/op_cases.h"
#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

using testing::PoolCase;

Pool2dParams P(int64_t k, int64_t s, int64_t pad, bool count_include_pad = true) {
  return testing::PoolParams(k, s, pad, count_include_pad);
}

testing::RefPoolParams Ref(const Pool2dParams& p) {
  return {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.count_include_pad};
}

class PoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolTest, MaxPoolMatchesReference) {
  const PoolCase& c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(3);
  const Vec x = RandomValues(NumElements(c.x), rng, -2.0, 2.0);  // distinct almost surely: no ties
  Shape ys;
  const Vec y_ref = testing::RefMaxPool2d(x, c.x, Ref(c.p), &ys);
  ASSERT_EQ(ys, Pool2dOutputShape(c.x, c.p));
  Tensor y = Tensor::Empty(ys, DType::kF32), argmax = Tensor::Empty(ys, DType::kI32);
  MaxPool2dForward(ctx, c.p, ToF32Tensor(x, c.x), y, argmax);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), y_ref, 0.0, 0.0));

  const Vec dy = RandomValues(NumElements(ys), rng);
  Tensor dx = Tensor::Empty(c.x, DType::kF32);
  MaxPool2dBackward(ctx, c.p, ToF32Tensor(dy, ys), argmax, dx);
  auto reference = [&](const std::vector<Vec>& in) {
    Shape s;
    return testing::RefMaxPool2d(in[0], c.x, Ref(c.p), &s);
  };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}));
}

TEST_P(PoolTest, AvgPoolMatchesReference) {
  for (bool include_pad : {true, false}) {
    PoolCase c = GetParam();
    c.p.count_include_pad = include_pad;
    ExecutionContext ctx = ExecutionContext::Cpu(2);
    std::mt19937_64 rng(4);
    const Vec x = RandomValues(NumElements(c.x), rng);
    Shape ys;
    const Vec y_ref = testing::RefAvgPool2d(x, c.x, Ref(c.p), &ys);
    Tensor y = Tensor::Empty(ys, DType::kF32);
    AvgPool2dForward(ctx, c.p, ToF32Tensor(x, c.x), y);
    EXPECT_TRUE(testing::AllClose(ToDoubles(y), y_ref, 1e-6, 1e-6)) << "count_include_pad " << include_pad;

    const Vec dy = RandomValues(NumElements(ys), rng);
    Tensor dx = Tensor::Empty(c.x, DType::kF32);
    AvgPool2dBackward(ctx, c.p, ToF32Tensor(dy, ys), dx);
    auto reference = [&](const std::vector<Vec>& in) {
      Shape s;
      return testing::RefAvgPool2d(in[0], c.x, Ref(c.p), &s);
    };
    EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}))
        << "count_include_pad " << include_pad;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolTest, ::testing::ValuesIn(testing::PoolCases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

TEST(GlobalAvgPoolTest, MatchesReference) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(5);
  const Shape xs = {3, 5, 4, 7};
  const Vec x = RandomValues(NumElements(xs), rng);
  Tensor y = Tensor::Empty({3, 5}, DType::kF32);
  GlobalAvgPoolForward(ctx, ToF32Tensor(x, xs), y);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), testing::RefGlobalAvgPool(x, xs), 1e-6, 1e-6));
  const Vec dy = RandomValues(15, rng);
  Tensor dx = Tensor::Empty(xs, DType::kF32);
  GlobalAvgPoolBackward(ctx, ToF32Tensor(dy, {3, 5}), dx);
  auto reference = [&](const std::vector<Vec>& in) { return testing::RefGlobalAvgPool(in[0], xs); };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}));
}

TEST(PoolShapeTest, ResNetStemPool) {
  EXPECT_EQ(Pool2dOutputShape({8, 64, 112, 112}, P(3, 2, 1)), (Shape{8, 64, 56, 56}));
}

}  // namespace
}  // namespace ddp
