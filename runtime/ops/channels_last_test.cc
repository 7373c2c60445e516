// Channels-last (NHWC) activations on the CPU: every op that takes them
// gives what it gives on contiguous (NCHW) tensors, in f32 and bf16.
// Inputs are converted with ConvertLayout (checked to round-trip exactly)
// and outputs converted back: elementwise ops, pooling and the layout
// conversion must be exact, convolutions and batch norm within 1e-5 in f32
// (other kernels, other summation orders), 1e-2 in bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/pooling.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/op_cases.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

class ChannelsLastTest : public ::testing::TestWithParam<DType> {
 protected:
  // ddp_train trains bf16 on CPUs with AVX-512 BF16 (or AMX) only; elsewhere
  // oneDNN may have no bf16 kernels at all.
  void SetUp() override {
    if (dtype() == DType::kBF16 && !CpuHasFastBf16()) GTEST_SKIP() << "this CPU lacks AVX-512 BF16";
  }
  DType dtype() const { return GetParam(); }
  double tolerance() const { return dtype() == DType::kF32 ? 1e-5 : 1e-2; }
  // Random values representable in dtype(), contiguous, of dtype().
  Tensor Random(const Shape& shape, std::mt19937_64& rng) {
    Tensor f32 = testing::ToF32Tensor(testing::RandomValues(NumElements(shape), rng), shape);
    if (dtype() == DType::kF32) return f32;
    Tensor low = Tensor::Empty(shape, dtype());
    CastScaled(ctx_, f32, 1.0f, low);
    return low;
  }
  Tensor Nhwc(const Tensor& t) {
    Tensor out = Tensor::Empty(t.shape(), t.dtype(), Device::Cpu(), MemoryFormat::kChannelsLast);
    ConvertLayout(ctx_, t, out);
    return out;
  }
  Tensor Nchw(const Tensor& t) {
    Tensor out = Tensor::Empty(t.shape(), t.dtype());
    ConvertLayout(ctx_, t, out);
    return out;
  }
  Tensor Like(const Tensor& t, const Shape& shape, DType dtype) {
    return Tensor::Empty(shape, dtype, Device::Cpu(), t.format());
  }
  // `nhwc` (converted back to NCHW) against `nchw`.
  ::testing::AssertionResult Near(const Tensor& nhwc, const Tensor& nchw, double tolerance) {
    const Tensor back = nhwc.ndim() == 4 && nhwc.channels_last() ? Nchw(nhwc) : nhwc;
    const std::vector<double> expected = testing::ToDoubles(nchw);
    double scale = 0.0;
    for (double e : expected) scale = std::max(scale, std::abs(e));
    return testing::AllClose(testing::ToDoubles(back), expected, 0.0, tolerance * std::max(scale, 1e-30));
  }
  ExecutionContext ctx_ = ExecutionContext::Cpu(2);
};

TEST_P(ChannelsLastTest, ConvertLayoutRoundTripsExactly) {
  std::mt19937_64 rng(1);
  Tensor x = Random({2, 5, 3, 4}, rng);
  const Tensor nhwc = Nhwc(x);
  EXPECT_TRUE(nhwc.channels_last());
  // Element (n=1, c=2, h=1, w=3) sits at NHWC offset ((1*3+1)*4+3)*5+2.
  EXPECT_EQ(nhwc.GetAsDouble(((1 * 3 + 1) * 4 + 3) * 5 + 2), x.GetAsDouble(((1 * 5 + 2) * 3 + 1) * 4 + 3));
  EXPECT_EQ(testing::ToDoubles(Nchw(nhwc)), testing::ToDoubles(x));
}

TEST_P(ChannelsLastTest, ConvolutionsMatchNchw) {
  for (const testing::ConvCase& c : testing::ConvCases()) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(42);
    Tensor x = Random(c.x, rng), w = Random(c.w, rng);
    Tensor b = testing::ToF32Tensor(testing::RandomValues(c.w[0], rng), {c.w[0]});
    const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
    Tensor y = Tensor::Empty(ys, dtype()), xl = Nhwc(x), yl = Like(xl, ys, dtype());
    Conv2dForward(ctx_, c.p, x, w, c.bias ? &b : nullptr, y);
    Conv2dForward(ctx_, c.p, xl, w, c.bias ? &b : nullptr, yl);
    EXPECT_TRUE(Near(yl, y, tolerance())) << "forward";
    Tensor dy = Random(ys, rng), dyl = Nhwc(dy);
    Tensor dx = Tensor::Empty(c.x, dtype()), dxl = Like(xl, c.x, dtype());
    Conv2dBackwardData(ctx_, c.p, dy, w, dx);
    Conv2dBackwardData(ctx_, c.p, dyl, w, dxl);
    EXPECT_TRUE(Near(dxl, dx, tolerance())) << "backward data";
    Tensor dw = Tensor::Empty(c.w, DType::kF32), dwl = Tensor::Empty(c.w, DType::kF32);
    Tensor db = Tensor::Empty({c.w[0]}, DType::kF32), dbl = Tensor::Empty({c.w[0]}, DType::kF32);
    Conv2dBackwardWeights(ctx_, c.p, x, dy, dw, c.bias ? &db : nullptr);
    Conv2dBackwardWeights(ctx_, c.p, xl, dyl, dwl, c.bias ? &dbl : nullptr);
    EXPECT_TRUE(Near(dwl, dw, tolerance())) << "backward weights";
    if (c.bias) {
      EXPECT_TRUE(Near(dbl, db, tolerance())) << "bias gradient";
    }
    // Weights laid out [K, R, S, C] (channels-last, as cuDNN's NHWC
    // convolutions take them), and their gradient written so.
    Tensor wl = Nhwc(w), ylw = Like(xl, ys, dtype()), dxlw = Like(xl, c.x, dtype());
    Conv2dForward(ctx_, c.p, xl, wl, c.bias ? &b : nullptr, ylw);
    EXPECT_TRUE(Near(ylw, y, tolerance())) << "forward, channels-last weights";
    Conv2dBackwardData(ctx_, c.p, dyl, wl, dxlw);
    EXPECT_TRUE(Near(dxlw, dx, tolerance())) << "backward data, channels-last weights";
    Tensor dwlw = Tensor::Empty(c.w, DType::kF32, Device::Cpu(), MemoryFormat::kChannelsLast);
    Conv2dBackwardWeights(ctx_, c.p, xl, dyl, dwlw, nullptr);
    EXPECT_TRUE(Near(dwlw, dw, tolerance())) << "backward weights into channels-last weights";
  }
}

TEST_P(ChannelsLastTest, BatchNormMatchesNchw) {
  std::mt19937_64 rng(5);
  struct Fusion {
    bool residual, relu;
  };
  for (const Shape& xs : {Shape{4, 3, 5, 7}, Shape{2, 64, 9, 9}, Shape{3, 20, 30, 30}}) {
    for (const Fusion f : {Fusion{false, false}, Fusion{false, true}, Fusion{true, true}}) {
      SCOPED_TRACE(ShapeToString(xs) + (f.residual ? " +residual" : "") + (f.relu ? " +relu" : ""));
      const int64_t c = xs[1];
      Tensor x = Random(xs, rng), xl = Nhwc(x), r = Random(xs, rng), rl = Nhwc(r);
      Tensor gamma = testing::ToF32Tensor(testing::RandomValues(c, rng, 0.5, 1.5), {c});
      Tensor beta = testing::ToF32Tensor(testing::RandomValues(c, rng), {c});
      auto zeros = [&] { return Tensor::Zeros({c}, DType::kF32); };
      const BatchNormEpilogue e{f.residual ? &r : nullptr, f.relu}, el{f.residual ? &rl : nullptr, f.relu};
      BatchNormParams p;
      Tensor y = Tensor::Empty(xs, dtype()), mean = zeros(), invstd = zeros(), rm = zeros(), rv = zeros();
      Tensor yl = Like(xl, xs, dtype()), meanl = zeros(), invstdl = zeros(), rml = zeros(), rvl = zeros();
      BatchNormForwardTraining(ctx_, p, x, gamma, beta, y, mean, invstd, rm, rv, e);
      BatchNormForwardTraining(ctx_, p, xl, gamma, beta, yl, meanl, invstdl, rml, rvl, el);
      EXPECT_TRUE(Near(yl, y, tolerance())) << "forward";
      EXPECT_TRUE(Near(meanl, mean, 1e-6)) << "mean (f32 statistics in either dtype)";
      EXPECT_TRUE(Near(rvl, rv, 1e-6)) << "running variance";
      Tensor dy = Random(xs, rng), dx = Tensor::Empty(xs, dtype()), dxl = Like(xl, xs, dtype());
      Tensor dr = Tensor::Empty(xs, dtype()), drl = Like(xl, xs, dtype());
      Tensor dg = zeros(), dbeta = zeros(), dgl = zeros(), dbetal = zeros();
      // Both backwards mask by the NCHW forward's output, so a value near
      // zero cannot fall on different sides of the ReLU.
      Tensor y_nhwc = Nhwc(y);
      BatchNormBackward(ctx_, p, x, dy, gamma, mean, invstd, dx, dg, dbeta,
                        {&y, f.residual ? &dr : nullptr, f.relu});
      BatchNormBackward(ctx_, p, xl, Nhwc(dy), gamma, meanl, invstdl, dxl, dgl, dbetal,
                        {&y_nhwc, f.residual ? &drl : nullptr, f.relu});
      EXPECT_TRUE(Near(dxl, dx, tolerance())) << "input gradient";
      EXPECT_TRUE(Near(dgl, dg, 1e-5)) << "weight gradient";
      EXPECT_TRUE(Near(dbetal, dbeta, 1e-5)) << "bias gradient";
      if (f.residual) {
        EXPECT_TRUE(Near(drl, dr, 0.0)) << "residual gradient: a select, exact";
      }
      Tensor yi = Tensor::Empty(xs, dtype()), yil = Like(xl, xs, dtype());
      BatchNormForwardInference(ctx_, p, x, gamma, beta, rm, rv, yi, e);
      BatchNormForwardInference(ctx_, p, xl, gamma, beta, rm, rv, yil, el);
      EXPECT_TRUE(Near(yil, yi, 0.0)) << "inference: the same arithmetic per element";
    }
  }
}

TEST_P(ChannelsLastTest, PoolingReluAndAddAreExact) {
  std::mt19937_64 rng(9);
  for (const testing::PoolCase& c : testing::PoolCases()) {
    SCOPED_TRACE(c.name);
    Tensor x = Random(c.x, rng), xl = Nhwc(x);
    const Shape ys = Pool2dOutputShape(c.x, c.p);
    Tensor y = Tensor::Empty(ys, dtype()), argmax = Tensor::Empty(ys, DType::kI32);
    Tensor yl = Like(xl, ys, dtype()), argmaxl = Tensor::Empty(ys, DType::kI32);
    MaxPool2dForward(ctx_, c.p, x, y, argmax);
    MaxPool2dForward(ctx_, c.p, xl, yl, argmaxl);
    EXPECT_TRUE(Near(yl, y, 0.0)) << "max pool";
    Tensor dy = Random(ys, rng), dx = Tensor::Empty(c.x, dtype()), dxl = Like(xl, c.x, dtype());
    MaxPool2dBackward(ctx_, c.p, dy, argmax, dx);
    MaxPool2dBackward(ctx_, c.p, Nhwc(dy), argmaxl, dxl);
    EXPECT_TRUE(Near(dxl, dx, 0.0)) << "max pool backward";
  }
  {
    // NaNs in two rows of one window: the first NaN wins in both formats, so
    // backward sends the gradient to the same input.
    const Pool2dParams p = testing::PoolParams(3, 3, 0);
    Tensor x = Tensor::Zeros({1, 2, 3, 3}, DType::kF32);
    float* xd = x.data<float>();
    xd[1] = std::nanf("");  // channel 0, row 0
    xd[4] = std::nanf("");  // channel 0, row 1
    xd[9 + 7] = std::nanf("");  // channel 1, row 2
    Tensor xt = x;
    if (dtype() != DType::kF32) {
      xt = Tensor::Empty(x.shape(), dtype());
      CastScaled(ctx_, x, 1.0f, xt);
    }
    Tensor y = Tensor::Empty({1, 2, 1, 1}, dtype()), argmax = Tensor::Empty({1, 2, 1, 1}, DType::kI32);
    Tensor xl = Nhwc(xt), yl = Like(xl, {1, 2, 1, 1}, dtype()), argmaxl = Tensor::Empty({1, 2, 1, 1}, DType::kI32);
    MaxPool2dForward(ctx_, p, xt, y, argmax);
    MaxPool2dForward(ctx_, p, xl, yl, argmaxl);
    EXPECT_EQ(argmax.data<int32_t>()[0], 1) << "the first NaN of the window, not the last row's";
    EXPECT_EQ(argmax.data<int32_t>()[1], 7);
    EXPECT_EQ(argmaxl.data<int32_t>()[0], 1);
    EXPECT_EQ(argmaxl.data<int32_t>()[1], 7);
  }
  const Shape s = {3, 7, 6, 5};
  Tensor a = Random(s, rng), b = Random(s, rng), al = Nhwc(a), bl = Nhwc(b);
  Tensor sum = Tensor::Empty(s, dtype()), suml = Like(al, s, dtype());
  Add(ctx_, a, b, sum);
  Add(ctx_, al, bl, suml);
  EXPECT_TRUE(Near(suml, sum, 0.0)) << "add";
  Tensor relu = Tensor::Empty(s, dtype()), relul = Like(al, s, dtype());
  ReluForward(ctx_, a, relu);
  ReluForward(ctx_, al, relul);
  EXPECT_TRUE(Near(relul, relu, 0.0)) << "ReLU";
  Tensor avg = Tensor::Empty({3, 7}, dtype()), avgl = Tensor::Empty({3, 7}, dtype());
  GlobalAvgPoolForward(ctx_, a, avg);
  GlobalAvgPoolForward(ctx_, al, avgl);
  EXPECT_TRUE(Near(avgl, avg, dtype() == DType::kF32 ? 1e-6 : 1e-2)) << "global average pool";
  Tensor dx = Tensor::Empty(s, dtype()), dxl = Like(al, s, dtype());
  GlobalAvgPoolBackward(ctx_, avg, dx);
  GlobalAvgPoolBackward(ctx_, avg, dxl);
  EXPECT_TRUE(Near(dxl, dx, 0.0)) << "global average pool backward";
}

INSTANTIATE_TEST_SUITE_P(Types, ChannelsLastTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace ddp
