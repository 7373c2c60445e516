// The CPU ops in bf16 (mixed precision): forward outputs against float64
// references on bf16-rounded inputs, gradients against the f32 ops (which
// the per-op tests check by finite differences), all within bf16's 1e-2;
// and cases where bf16 accumulation would fail outright (sums of thousands
// of ones stall at 256 in bf16), which pin f32 accumulation down.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/transformer.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/op_cases.h"
#include "runtime/testing/reference_ops.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::Vec;
using testing::SameBits;

// Values rounded to bf16, so the f32 and f64 references see the bf16 op's
// exact inputs.
Vec RoundedRandom(int64_t n, std::mt19937_64& rng, double bound = 1.0) {
  Vec v = testing::RandomValues(n, rng, -bound, bound);
  for (double& x : v) x = BFloat16ToFloat(FloatToBFloat16(static_cast<float>(x)));
  return v;
}

Tensor Bf16(ExecutionContext& ctx, const Vec& values, const Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::kBF16);
  CastScaled(ctx, testing::ToF32Tensor(values, shape), 1.0f, t);
  return t;
}

// Within bf16's precision: 1e-2 relative, and 1e-2 of the largest expected
// magnitude absolute (for values that cancel to near zero).
::testing::AssertionResult NearBf16(const Tensor& actual, const Vec& expected) {
  double scale = 0.0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  return testing::AllClose(testing::ToDoubles(actual), expected, 1e-2, 1e-2 * scale);
}

// ddp_train trains bf16 on CPUs with AVX-512 BF16 (or AMX) only; elsewhere
// oneDNN may have no bf16 kernels at all.
#define SKIP_WITHOUT_CPU_BF16() \
  if (!CpuHasFastBf16()) GTEST_SKIP() << "this CPU lacks AVX-512 BF16: bf16 trains in f32 here"

class Bf16ConvTest : public ::testing::TestWithParam<testing::ConvCase> {};

TEST_P(Bf16ConvTest, ForwardMatchesFloat64AndGradientsMatchF32) {
  SKIP_WITHOUT_CPU_BF16();
  const testing::ConvCase& c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(7);
  const Vec x = RoundedRandom(NumElements(c.x), rng), w = RoundedRandom(NumElements(c.w), rng);
  const Vec b = c.bias ? testing::RandomValues(c.w[0], rng) : Vec{};
  const testing::RefConv2dParams rp{c.p.stride_h, c.p.stride_w, c.p.pad_h,   c.p.pad_w,
                                    c.p.dilation_h, c.p.dilation_w, c.p.groups};
  Shape ys;
  const Vec y_ref = testing::RefConv2d(x, c.x, w, c.w, b, rp, &ys);
  Tensor bias = c.bias ? testing::ToF32Tensor(b, {c.w[0]}) : Tensor();
  Tensor x16 = Bf16(ctx, x, c.x), w16 = Bf16(ctx, w, c.w);
  Tensor y16 = Tensor::Empty(ys, DType::kBF16);
  Conv2dForward(ctx, c.p, x16, w16, c.bias ? &bias : nullptr, y16);
  EXPECT_TRUE(NearBf16(y16, y_ref));

  const Vec dy = RoundedRandom(NumElements(ys), rng);
  Tensor x32 = testing::ToF32Tensor(x, c.x), w32 = testing::ToF32Tensor(w, c.w), dy32 = testing::ToF32Tensor(dy, ys);
  Tensor dx32 = Tensor::Empty(c.x, DType::kF32), dw32 = Tensor::Empty(c.w, DType::kF32);
  Tensor db32 = Tensor::Empty({c.w[0]}, DType::kF32);
  Conv2dBackwardData(ctx, c.p, dy32, w32, dx32);
  Conv2dBackwardWeights(ctx, c.p, x32, dy32, dw32, c.bias ? &db32 : nullptr);

  Tensor dy16 = Bf16(ctx, dy, ys), dx16 = Tensor::Empty(c.x, DType::kBF16);
  Tensor dw = Tensor::Empty(c.w, DType::kF32), db = Tensor::Empty({c.w[0]}, DType::kF32);  // f32 weight gradients
  Conv2dBackwardData(ctx, c.p, dy16, w16, dx16);
  Conv2dBackwardWeights(ctx, c.p, x16, dy16, dw, c.bias ? &db : nullptr);
  EXPECT_TRUE(NearBf16(dx16, testing::ToDoubles(dx32)));
  EXPECT_TRUE(NearBf16(dw, testing::ToDoubles(dw32)));
  if (c.bias) {
    EXPECT_TRUE(NearBf16(db, testing::ToDoubles(db32)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16ConvTest, ::testing::ValuesIn(testing::ConvCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Bf16AccumulationTest, ConvolutionsAccumulateInF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  // A 3x3 window over 512 channels of ones: 4608 products per output.
  const Conv2dParams p = testing::ConvParams(1, 0);
  Tensor x = Tensor::Empty({1, 512, 3, 3}, DType::kBF16), w = Tensor::Empty({1, 512, 3, 3}, DType::kBF16);
  x.Fill(1.0);
  w.Fill(1.0);
  Tensor y = Tensor::Empty({1, 1, 1, 1}, DType::kBF16);
  Conv2dForward(ctx, p, x, w, nullptr, y);
  EXPECT_EQ(y.GetAsDouble(0), 4608.0);
  // The weight gradient of a 1x1 convolution sums over batch and pixels.
  Tensor x1 = Tensor::Empty({8, 1, 32, 32}, DType::kBF16), dy = Tensor::Empty({8, 1, 32, 32}, DType::kBF16);
  x1.Fill(1.0);
  dy.Fill(1.0);
  Tensor dw = Tensor::Empty({1, 1, 1, 1}, DType::kF32);
  Conv2dBackwardWeights(ctx, p, x1, dy, dw, nullptr);
  EXPECT_EQ(dw.GetAsDouble(0), 8192.0);
}

TEST(Bf16LinearTest, MatchesFloat64AndF32AndAccumulatesInF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(3);
  const Shape xs = {6, 300}, ws = {10, 300};
  const Vec x = RoundedRandom(NumElements(xs), rng), w = RoundedRandom(NumElements(ws), rng);
  const Vec b = testing::RandomValues(10, rng);
  Tensor x16 = Bf16(ctx, x, xs), w16 = Bf16(ctx, w, ws), bias = testing::ToF32Tensor(b, {10});
  Tensor y = Tensor::Empty({6, 10}, DType::kF32);  // f32 logits from bf16 operands
  LinearForward(ctx, x16, w16, &bias, y);
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(y), testing::RefLinear(x, xs, w, ws, b), 1e-5, 1e-5))
      << "bf16 products are exact in f32; only the sum's order differs";

  const Vec dy = testing::RandomValues(60, rng);
  Tensor dy32 = testing::ToF32Tensor(dy, {6, 10});
  Tensor x32 = testing::ToF32Tensor(x, xs), w32 = testing::ToF32Tensor(w, ws);
  Tensor dx32 = Tensor::Empty(xs, DType::kF32), dw32 = Tensor::Empty(ws, DType::kF32);
  LinearBackwardData(ctx, dy32, w32, &dx32);
  LinearBackwardWeights(ctx, x32, dy32, dw32, nullptr);
  Tensor dx16 = Tensor::Empty(xs, DType::kBF16), dw = Tensor::Empty(ws, DType::kF32);
  LinearBackwardData(ctx, dy32, w16, &dx16);
  LinearBackwardWeights(ctx, x16, dy32, dw, nullptr);
  EXPECT_TRUE(NearBf16(dx16, testing::ToDoubles(dx32)));
  EXPECT_TRUE(NearBf16(dw, testing::ToDoubles(dw32)));

  Tensor ones_x = Tensor::Empty({2, 4096}, DType::kBF16), ones_w = Tensor::Empty({3, 4096}, DType::kBF16);
  ones_x.Fill(1.0);
  ones_w.Fill(1.0);
  Tensor sums = Tensor::Empty({2, 3}, DType::kF32);
  LinearForward(ctx, ones_x, ones_w, nullptr, sums);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sums.GetAsDouble(i), 4096.0);
}

TEST(Bf16BatchNormTest, TrainingMatchesFloat64AndBackwardMatchesF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(5);
  const Shape xs = {4, 3, 5, 7};
  Vec x = RoundedRandom(NumElements(xs), rng);
  for (double& v : x) v = BFloat16ToFloat(FloatToBFloat16(static_cast<float>(3.0 + 2.0 * v)));  // a mean to remove
  const Vec gamma = testing::RandomValues(3, rng, 0.5, 1.5), beta = testing::RandomValues(3, rng);
  BatchNormParams p;
  const Vec y_ref = testing::RefBatchNormTraining(x, xs, gamma, beta, p.eps);
  Tensor g = testing::ToF32Tensor(gamma, {3}), b = testing::ToF32Tensor(beta, {3});
  auto stats = [] { return Tensor::Zeros({3}, DType::kF32); };
  Tensor mean16 = stats(), invstd16 = stats(), rm16 = stats(), rv16 = stats();
  Tensor x16 = Bf16(ctx, x, xs), y16 = Tensor::Empty(xs, DType::kBF16);
  BatchNormForwardTraining(ctx, p, x16, g, b, y16, mean16, invstd16, rm16, rv16);
  EXPECT_TRUE(NearBf16(y16, y_ref));

  Tensor mean32 = stats(), invstd32 = stats(), rm32 = stats(), rv32 = stats();
  Tensor x32 = testing::ToF32Tensor(x, xs), y32 = Tensor::Empty(xs, DType::kF32);
  BatchNormForwardTraining(ctx, p, x32, g, b, y32, mean32, invstd32, rm32, rv32);
  // Statistics are f32 from the same inputs: equal to f32 rounding.
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(mean16), testing::ToDoubles(mean32), 1e-6, 1e-6));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(rv16), testing::ToDoubles(rv32), 1e-6, 1e-6));

  const Vec dy = RoundedRandom(NumElements(xs), rng);
  Tensor dx32 = Tensor::Empty(xs, DType::kF32), dg32 = stats(), db32 = stats();
  BatchNormBackward(ctx, p, x32, testing::ToF32Tensor(dy, xs), g, mean32, invstd32, dx32, dg32, db32);
  Tensor dx16 = Tensor::Empty(xs, DType::kBF16), dg16 = stats(), db16 = stats();
  BatchNormBackward(ctx, p, x16, Bf16(ctx, dy, xs), g, mean16, invstd16, dx16, dg16, db16);
  EXPECT_TRUE(NearBf16(dx16, testing::ToDoubles(dx32)));
  EXPECT_TRUE(NearBf16(dg16, testing::ToDoubles(dg32)));
  EXPECT_TRUE(NearBf16(db16, testing::ToDoubles(db32)));
}

// BN + add + ReLU fused in bf16 rounds once, at the end: within bf16 of
// the f32 fusion on the same inputs; the residual's gradient is exact.
TEST(Bf16BatchNormTest, FusedEpilogueMatchesF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(9);
  const Shape xs = {4, 8, 6, 5};
  const int64_t n = NumElements(xs);
  const Vec x = RoundedRandom(n, rng), r = RoundedRandom(n, rng), dy = RoundedRandom(n, rng);
  Tensor g = testing::ToF32Tensor(testing::RandomValues(8, rng, 0.5, 1.5), {8});
  Tensor b = testing::ToF32Tensor(testing::RandomValues(8, rng), {8});
  auto stats = [] { return Tensor::Zeros({8}, DType::kF32); };
  BatchNormParams p;
  struct Run {
    Tensor y, dx, dr, dg, db;
  };
  auto run = [&](DType dtype) {
    auto tensor = [&](const Vec& v) { return dtype == DType::kF32 ? testing::ToF32Tensor(v, xs) : Bf16(ctx, v, xs); };
    Tensor xt = tensor(x), rt = tensor(r), mean = stats(), invstd = stats(), rm = stats(), rv = stats();
    Run out{Tensor::Empty(xs, dtype), Tensor::Empty(xs, dtype), Tensor::Empty(xs, dtype), stats(), stats()};
    BatchNormForwardTraining(ctx, p, xt, g, b, out.y, mean, invstd, rm, rv, {&rt, true});
    BatchNormBackward(ctx, p, xt, tensor(dy), g, mean, invstd, out.dx, out.dg, out.db, {&out.y, &out.dr, true});
    return out;
  };
  const Run f32 = run(DType::kF32), bf16 = run(DType::kBF16);
  EXPECT_TRUE(NearBf16(bf16.y, testing::ToDoubles(f32.y)));
  EXPECT_TRUE(NearBf16(bf16.dx, testing::ToDoubles(f32.dx)));
  EXPECT_TRUE(NearBf16(bf16.dg, testing::ToDoubles(f32.dg)));
  EXPECT_TRUE(NearBf16(bf16.db, testing::ToDoubles(f32.db)));
  const Vec y16 = testing::ToDoubles(bf16.y), dr16 = testing::ToDoubles(bf16.dr);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dr16[i], y16[i] > 0.0 ? dy[i] : 0.0) << "element " << i;
}

TEST(Bf16ElementwiseTest, ReluAndAddMatchFloat64) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(9);
  const int64_t n = 100000;  // past the parallel threshold
  Vec a = RoundedRandom(n, rng), b = RoundedRandom(n, rng);
  a[0] = std::nan("");
  a[1] = -std::nan("");
  a[2] = -0.0;
  a[3] = -std::numeric_limits<double>::infinity();
  a[4] = std::numeric_limits<double>::infinity();
  Tensor a16 = Bf16(ctx, a, {n}), b16 = Bf16(ctx, b, {n});
  Tensor relu = Tensor::Empty({n}, DType::kBF16);
  ReluForward(ctx, a16, relu);
  const Vec relu_ref = testing::RefRelu(a);
  const Vec relu_got = testing::ToDoubles(relu);
  EXPECT_TRUE(std::isnan(relu_got[0]) && std::isnan(relu_got[1])) << "NaN stays NaN, as in PyTorch";
  EXPECT_EQ(relu_got[2], 0.0);
  EXPECT_EQ(relu_got[3], 0.0);
  EXPECT_EQ(relu_got[4], std::numeric_limits<double>::infinity());
  for (int64_t i = 5; i < n; ++i) ASSERT_EQ(relu_got[i], relu_ref[i]) << "ReLU is exact, element " << i;
  // Backward passes dy where the output is positive or NaN.
  Tensor dx = Tensor::Empty({n}, DType::kBF16);
  ReluBackward(ctx, relu, b16, dx);
  const Vec dx_got = testing::ToDoubles(dx);
  EXPECT_EQ(dx_got[0], b[0]);
  EXPECT_EQ(dx_got[1], b[1]);
  EXPECT_EQ(dx_got[2], 0.0);
  for (int64_t i = 5; i < n; ++i) ASSERT_EQ(dx_got[i], relu_got[i] > 0.0 ? b[i] : 0.0) << "element " << i;

  Tensor sum = Tensor::Empty({n}, DType::kBF16);
  Add(ctx, a16, b16, sum);
  const Vec sum_ref = testing::RefAdd(a, b);
  const Vec sum_got = testing::ToDoubles(sum);
  for (int64_t i = 5; i < n; ++i) {
    ASSERT_EQ(sum_got[i], BFloat16ToFloat(FloatToBFloat16(static_cast<float>(sum_ref[i]))))
        << "the f32 sum rounded once to bf16, element " << i;
  }
}

// BERT's layer norm, GELU, tanh, head layout and dropout with bf16
// activations: each computes in
// f32 (the statistics in double) from the bf16 inputs and rounds once on
// store, so its output is exactly the f32 op's output on the same values
// rounded to bf16; layer norm's statistics and parameter gradients (f32)
// equal the f32 op's bit for bit. These are plain loops, not oneDNN's: no
// CPU feature is needed.
TEST(Bf16TransformerOpsTest, LayerNormGeluTanhRoundTheF32OpOnce) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(13);
  const Shape s = {37, 96};
  const int64_t n = NumElements(s);
  const Vec x = RoundedRandom(n, rng), dy = RoundedRandom(n, rng);
  const Tensor x32 = testing::ToF32Tensor(x, s), dy32 = testing::ToF32Tensor(dy, s);
  const Tensor x16 = Bf16(ctx, x, s), dy16 = Bf16(ctx, dy, s);
  auto rounded = [&](const Tensor& f32) { return Bf16(ctx, testing::ToDoubles(f32), f32.shape()); };
  Tensor gamma = testing::ToF32Tensor(testing::RandomValues(96, rng), {96});
  Tensor beta = testing::ToF32Tensor(testing::RandomValues(96, rng), {96});
  Tensor y32 = Tensor::Empty(s, DType::kF32), y16 = Tensor::Empty(s, DType::kBF16);
  Tensor mean32 = Tensor::Empty({37}, DType::kF32), rstd32 = Tensor::Empty({37}, DType::kF32);
  Tensor mean16 = Tensor::Empty({37}, DType::kF32), rstd16 = Tensor::Empty({37}, DType::kF32);
  LayerNormForward(ctx, x32, gamma, beta, 1e-12, y32, mean32, rstd32);
  LayerNormForward(ctx, x16, gamma, beta, 1e-12, y16, mean16, rstd16);
  EXPECT_TRUE(SameBits(y16, rounded(y32))) << "layer norm";
  EXPECT_TRUE(SameBits(mean16, mean32) && SameBits(rstd16, rstd32)) << "layer norm statistics";
  Tensor dx32 = Tensor::Empty(s, DType::kF32), dx16 = Tensor::Empty(s, DType::kBF16);
  Tensor dg32 = Tensor::Empty({96}, DType::kF32), db32 = Tensor::Empty({96}, DType::kF32);
  Tensor dg16 = Tensor::Empty({96}, DType::kF32), db16 = Tensor::Empty({96}, DType::kF32);
  LayerNormBackward(ctx, x32, dy32, gamma, mean32, rstd32, dx32, dg32, db32);
  LayerNormBackward(ctx, x16, dy16, gamma, mean16, rstd16, dx16, dg16, db16);
  EXPECT_TRUE(SameBits(dx16, rounded(dx32))) << "layer norm backward";
  EXPECT_TRUE(SameBits(dg16, dg32) && SameBits(db16, db32)) << "layer norm parameter gradients, f32";

  Tensor g32 = Tensor::Empty(s, DType::kF32), g16 = Tensor::Empty(s, DType::kBF16);
  GeluForward(ctx, x32, g32);
  GeluForward(ctx, x16, g16);
  EXPECT_TRUE(SameBits(g16, rounded(g32))) << "GELU";
  GeluBackward(ctx, x32, dy32, g32);
  GeluBackward(ctx, x16, dy16, g16);
  EXPECT_TRUE(SameBits(g16, rounded(g32))) << "GELU backward";
  Tensor t32 = Tensor::Empty(s, DType::kF32), t16 = Tensor::Empty(s, DType::kBF16);
  TanhForward(ctx, x32, t32);
  TanhForward(ctx, x16, t16);
  EXPECT_TRUE(SameBits(t16, rounded(t32))) << "tanh";
  // The backward reads the forward's output: the bf16 one, as training keeps.
  const Tensor t16_as_f32 = testing::ToF32Tensor(testing::ToDoubles(t16), s);
  Tensor dt32 = Tensor::Empty(s, DType::kF32), dt16 = Tensor::Empty(s, DType::kBF16);
  TanhBackward(ctx, t16_as_f32, dy32, dt32);
  TanhBackward(ctx, t16, dy16, dt16);
  EXPECT_TRUE(SameBits(dt16, rounded(dt32))) << "tanh backward";

  // Attention's head layout: a copy, exact in any type.
  const Shape rows = {6 * 5, 4 * 8}, heads = {6 * 4, 5, 8};
  const Vec r = RoundedRandom(NumElements(rows), rng);
  Tensor split32 = Tensor::Empty(heads, DType::kF32), split16 = Tensor::Empty(heads, DType::kBF16);
  SplitHeads(ctx, testing::ToF32Tensor(r, rows), 4, split32);
  SplitHeads(ctx, Bf16(ctx, r, rows), 4, split16);
  EXPECT_TRUE(SameBits(split16, rounded(split32))) << "SplitHeads";
  Tensor merged16 = Tensor::Empty(rows, DType::kBF16);
  MergeHeads(ctx, split16, 4, merged16);
  EXPECT_TRUE(SameBits(merged16, Bf16(ctx, r, rows))) << "MergeHeads undoes SplitHeads";

  // Dropout: the same mask as f32's, the kept values scaled in f32 and
  // rounded once.
  const DropoutKey key{/*seed=*/5, /*step=*/9, /*site=*/2};
  Tensor d32 = Tensor::Empty(s, DType::kF32), d16 = Tensor::Empty(s, DType::kBF16);
  Tensor keep32 = Tensor::Empty(s, DType::kU8), keep16 = Tensor::Empty(s, DType::kU8);
  DropoutForward(ctx, x32, 0.3f, key, 11, d32, keep32);
  DropoutForward(ctx, x16, 0.3f, key, 11, d16, keep16);
  EXPECT_TRUE(SameBits(keep16, keep32)) << "dropout mask";
  EXPECT_TRUE(SameBits(d16, rounded(d32))) << "dropout";
  DropoutBackward(ctx, dy32, keep32, 0.3f, d32);
  DropoutBackward(ctx, dy16, keep16, 0.3f, d16);
  EXPECT_TRUE(SameBits(d16, rounded(d32))) << "dropout backward";
}

// Attention's masked softmax and its backward, and the row gather and
// scatter-add (the pooler's and the MLM head's), with bf16 activations:
// the f32 op's result rounded once, bit for bit (plain loops: no CPU
// feature needed).
TEST(Bf16TransformerOpsTest, SoftmaxGatherAndScatterRoundTheF32OpOnce) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(17);
  auto rounded = [&](const Tensor& f32) { return Bf16(ctx, testing::ToDoubles(f32), f32.shape()); };
  const Shape s = {3, 2, 7, 9};  // [N, heads, Tq, Tk]
  const Vec scores = RoundedRandom(NumElements(s), rng, 4.0), dprobs = RoundedRandom(NumElements(s), rng);
  Tensor mask = Tensor::FromVector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                             1, 1, 1, 1, 1, 0, 0, 0, 0,  //
                                             0, 0, 0, 0, 0, 0, 0, 0, 0},
                                            {3, 9});
  Tensor p32 = Tensor::Empty(s, DType::kF32), p16 = Tensor::Empty(s, DType::kBF16);
  MaskedSoftmaxForward(ctx, testing::ToF32Tensor(scores, s), &mask, p32);
  MaskedSoftmaxForward(ctx, Bf16(ctx, scores, s), &mask, p16);
  EXPECT_TRUE(SameBits(p16, rounded(p32))) << "masked softmax";
  // The backward reads the bf16 probabilities, as training keeps them.
  const Tensor p16_as_f32 = testing::ToF32Tensor(testing::ToDoubles(p16), s);
  Tensor ds32 = Tensor::Empty(s, DType::kF32), ds16 = Tensor::Empty(s, DType::kBF16);
  SoftmaxBackward(ctx, p16_as_f32, testing::ToF32Tensor(dprobs, s), ds32);
  SoftmaxBackward(ctx, p16, Bf16(ctx, dprobs, s), ds16);
  EXPECT_TRUE(SameBits(ds16, rounded(ds32))) << "softmax backward";

  // Rows 4, 0 and 9 of a [12, 16] table, and back (distinct rows: the
  // scatter adds each to zero, so the f32 and bf16 sums agree exactly).
  const Shape table_shape = {12, 16};
  const Vec table = RoundedRandom(NumElements(table_shape), rng);
  const Tensor rows = Tensor::FromVector<int64_t>({4, 0, 9}, {3});
  Tensor g32 = Tensor::Empty({3, 16}, DType::kF32), g16 = Tensor::Empty({3, 16}, DType::kBF16);
  GatherRows(ctx, testing::ToF32Tensor(table, table_shape), rows, g32);
  GatherRows(ctx, Bf16(ctx, table, table_shape), rows, g16);
  EXPECT_TRUE(SameBits(g16, rounded(g32))) << "gather";
  Tensor back32 = Tensor::Empty(table_shape, DType::kF32), back16 = Tensor::Empty(table_shape, DType::kBF16);
  ScatterAddRows(ctx, rows, g32, back32);
  ScatterAddRows(ctx, rows, g16, back16);
  EXPECT_TRUE(SameBits(back16, rounded(back32))) << "scatter-add";
  EXPECT_EQ(back16.GetAsDouble(4 * 16 + 3), table[4 * 16 + 3]);
  EXPECT_EQ(back16.GetAsDouble(16 + 3), 0.0) << "rows no one gathered get zero";
}

// Attention's batched products and BERT's hidden linear layers with bf16
// activations: f32 accumulation of exact bf16 products, so the f32 result
// follows the f32 op on the same values to 1e-5, and a bf16 result is that
// rounded (within one bf16 step). The bias gradient of bf16 output
// gradients sums in double: the f32 op's, bit for bit.
TEST(Bf16LinearTest, BatchedProductsAndHiddenLayersAccumulateInF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(19);
  const int64_t batch = 6, m = 7, n = 5, k = 300;
  struct Case {
    bool ta, tb;
  };
  for (const Case c : {Case{false, true}, Case{false, false}, Case{true, false}}) {
    const Shape as = c.ta ? Shape{batch, k, m} : Shape{batch, m, k};
    const Shape bs = c.tb ? Shape{batch, n, k} : Shape{batch, k, n};
    const Vec a = RoundedRandom(NumElements(as), rng), b = RoundedRandom(NumElements(bs), rng);
    Tensor c32 = Tensor::Empty({batch, m, n}, DType::kF32);
    BatchedGemm(ctx, c.ta, c.tb, 0.125f, testing::ToF32Tensor(a, as), testing::ToF32Tensor(b, bs), 0.0f, c32);
    const Vec expected = testing::ToDoubles(c32);
    Tensor wide = Tensor::Empty({batch, m, n}, DType::kF32), narrow = Tensor::Empty({batch, m, n}, DType::kBF16);
    BatchedGemm(ctx, c.ta, c.tb, 0.125f, Bf16(ctx, a, as), Bf16(ctx, b, bs), 0.0f, wide);
    BatchedGemm(ctx, c.ta, c.tb, 0.125f, Bf16(ctx, a, as), Bf16(ctx, b, bs), 0.0f, narrow);
    EXPECT_TRUE(testing::AllClose(testing::ToDoubles(wide), expected, 1e-5, 1e-5)) << c.ta << c.tb;
    EXPECT_TRUE(testing::AllClose(testing::ToDoubles(narrow), expected, 1.0 / 128, 1e-6)) << c.ta << c.tb;
  }

  const Shape xs = {9, 64}, ws = {32, 64};
  const Vec x = RoundedRandom(NumElements(xs), rng), w = RoundedRandom(NumElements(ws), rng);
  const Vec bias = RoundedRandom(32, rng);
  Tensor y = Tensor::Empty({9, 32}, DType::kBF16);  // a hidden layer: bf16 in, bf16 out, bf16 bias
  Tensor bias16 = Bf16(ctx, bias, {32});
  LinearForward(ctx, Bf16(ctx, x, xs), Bf16(ctx, w, ws), &bias16, y);
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(y), testing::RefLinear(x, xs, w, ws, bias), 1.0 / 128, 1e-6));
  const Vec dy = RoundedRandom(9 * 32, rng);
  Tensor dw = Tensor::Empty(ws, DType::kF32), db = Tensor::Empty({32}, DType::kF32);
  Tensor dw32 = Tensor::Empty(ws, DType::kF32), db32 = Tensor::Empty({32}, DType::kF32);
  LinearBackwardWeights(ctx, Bf16(ctx, x, xs), Bf16(ctx, dy, {9, 32}), dw, &db);
  LinearBackwardWeights(ctx, testing::ToF32Tensor(x, xs), testing::ToF32Tensor(dy, {9, 32}), dw32, &db32);
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(dw), testing::ToDoubles(dw32), 1e-5, 1e-6));
  EXPECT_EQ(testing::ToDoubles(db), testing::ToDoubles(db32)) << "bias gradient: double sums of the same values";
}

TEST(Bf16PoolingTest, MaxPoolIsExactAndGlobalAveragePoolAccumulatesInF32) {
  SKIP_WITHOUT_CPU_BF16();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(11);
  for (const testing::PoolCase& c : testing::PoolCases()) {
    const Vec x = RoundedRandom(NumElements(c.x), rng);
    Shape ys;
    const Vec y_ref = testing::RefMaxPool2d(x, c.x, {c.p.kernel_h, c.p.kernel_w, c.p.stride_h, c.p.stride_w,
                                                     c.p.pad_h, c.p.pad_w}, &ys);
    Tensor y = Tensor::Empty(ys, DType::kBF16), argmax = Tensor::Empty(ys, DType::kI32);
    MaxPool2dForward(ctx, c.p, Bf16(ctx, x, c.x), y, argmax);
    EXPECT_EQ(testing::ToDoubles(y), y_ref) << c.name;
    // Backward against the f32 op given the same argmax.
    const Vec dy = RoundedRandom(NumElements(ys), rng);
    Tensor dx32 = Tensor::Empty(c.x, DType::kF32), dx16 = Tensor::Empty(c.x, DType::kBF16);
    MaxPool2dBackward(ctx, c.p, testing::ToF32Tensor(dy, ys), argmax, dx32);
    MaxPool2dBackward(ctx, c.p, Bf16(ctx, dy, ys), argmax, dx16);
    EXPECT_TRUE(NearBf16(dx16, testing::ToDoubles(dx32))) << c.name;
  }
  // 4096 ones per plane: a bf16 running sum would stop at 256.
  Tensor ones = Tensor::Empty({2, 3, 64, 64}, DType::kBF16);
  ones.Fill(1.0);
  Tensor mean = Tensor::Empty({2, 3}, DType::kBF16);
  GlobalAvgPoolForward(ctx, ones, mean);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(mean.GetAsDouble(i), 1.0);
  std::mt19937_64 rng2(13);
  const Vec x = RoundedRandom(2 * 3 * 5 * 6, rng2);
  Tensor avg = Tensor::Empty({2, 3}, DType::kBF16);
  GlobalAvgPoolForward(ctx, Bf16(ctx, x, {2, 3, 5, 6}), avg);
  EXPECT_TRUE(NearBf16(avg, testing::RefGlobalAvgPool(x, {2, 3, 5, 6})));
  Tensor dx = Tensor::Empty({2, 3, 5, 6}, DType::kBF16);
  GlobalAvgPoolBackward(ctx, avg, dx);
  EXPECT_EQ(dx.GetAsDouble(0), BFloat16ToFloat(FloatToBFloat16(static_cast<float>(avg.GetAsDouble(0) / 30.0))));
}

}  // namespace
}  // namespace ddp
