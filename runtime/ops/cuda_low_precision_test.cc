// Mixed precision on CUDA: every op that carries activations, run with bf16
// and with f16 data on the GPU, against the CPU's f32 op on the same inputs
// (rounded to the 16-bit type first), within 1e-2 of the largest magnitude;
// weight gradients come out in f32. Sums of thousands of ones, which only
// f32 accumulation gets right, pin the accumulation type down. Reports
// SKIPPED without a GPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/transformer.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/op_cases.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::OnCpu;
using testing::OnGpu;
using testing::ToDoubles;
using testing::ToF32Tensor;

constexpr double kTolerance = 1e-2;

double Round16(double v, DType dtype) {
  const float f = static_cast<float>(v);
  return dtype == DType::kBF16 ? BFloat16ToFloat(FloatToBFloat16(f)) : HalfToFloat(FloatToHalf(f));
}

class CudaLowPrecisionTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
    cuda::SetDevice(0);
  }
  DType low() const { return GetParam(); }
  // Random values already representable in the 16-bit type, as an f32 host
  // tensor.
  Tensor Random(const Shape& shape, std::mt19937_64& rng) {
    std::vector<double> v = testing::RandomValues(NumElements(shape), rng);
    for (double& x : v) x = Round16(x, low());
    return ToF32Tensor(v, shape);
  }
  // The f32 host tensor as a 16-bit GPU tensor (exact: its values are
  // representable).
  Tensor Low(const Tensor& host) {
    Tensor out = Tensor::Empty(host.shape(), low(), Device::Cuda(0));
    CastScaled(gpu_, OnGpu(host), 1.0f, out);
    return out;
  }
  Tensor GpuEmpty(const Shape& shape, DType dtype) { return Tensor::Empty(shape, dtype, Device::Cuda(0)); }
  // max |gpu - cpu| within kTolerance of max |cpu|.
  ::testing::AssertionResult Near(const Tensor& gpu, const Tensor& cpu) {
    const std::vector<double> c = ToDoubles(cpu);
    double scale = 0.0;
    for (double v : c) scale = std::max(scale, std::fabs(v));
    return testing::AllClose(ToDoubles(OnCpu(gpu)), c, 0.0, kTolerance * std::max(scale, 1e-30));
  }

  ExecutionContext cpu_ = ExecutionContext::Cpu(2);
  ExecutionContext gpu_ = ExecutionContext::Cuda(0, nullptr);
};

TEST_P(CudaLowPrecisionTest, ConvolutionsMatchTheCpuInF32) {
  std::vector<testing::ConvCase> cases = testing::ConvCases();
  cases.push_back({"resnet50_3x3", {4, 64, 28, 28}, {64, 64, 3, 3}, testing::ConvParams(1, 1), false});
  // Channels-last too: NHWC data with [K, R, S, C] weights, as a
  // channels-last 16-bit run feeds cuDNN, against the CPU's NHWC f32.
  for (const bool cl : {false, true}) {
    const MemoryFormat format = cl ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous;
    auto host = [&](const Tensor& nchw) {
      if (!cl || nchw.ndim() != 4) return nchw;
      Tensor out = Tensor::Empty(nchw.shape(), DType::kF32, Device::Cpu(), format);
      ConvertLayout(cpu_, nchw, out);
      return out;
    };
    auto device = [&](const Tensor& nchw) {  // 16-bit, on the GPU, in `format`
      if (!cl) return Low(nchw);
      Tensor out = Tensor::Empty(nchw.shape(), low(), Device::Cuda(0), format);
      ConvertLayout(gpu_, OnGpu(nchw), out);
      return out;
    };
    for (const testing::ConvCase& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + DTypeName(low()) + (cl ? " channels-last" : ""));
      std::mt19937_64 rng(42);
      Tensor x = Random(c.x, rng), w = Random(c.w, rng), b = Random({c.w[0]}, rng);
      const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
      Tensor y = Tensor::Empty(ys, DType::kF32, Device::Cpu(), format);
      Tensor gy = Tensor::Empty(ys, low(), Device::Cuda(0), format);
      Tensor gb = OnGpu(b);
      Conv2dForward(cpu_, c.p, host(x), w, c.bias ? &b : nullptr, y);
      Conv2dForward(gpu_, c.p, device(x), device(w), c.bias ? &gb : nullptr, gy);
      EXPECT_TRUE(Near(gy, y)) << "forward";

      Tensor dy = Random(ys, rng);
      Tensor dx = Tensor::Empty(c.x, DType::kF32, Device::Cpu(), format), dw = Tensor::Empty(c.w, DType::kF32);
      Tensor db = Tensor::Empty({c.w[0]}, DType::kF32);
      Conv2dBackwardData(cpu_, c.p, host(dy), w, dx);
      Conv2dBackwardWeights(cpu_, c.p, host(x), host(dy), dw, c.bias ? &db : nullptr);
      Tensor gdx = Tensor::Empty(c.x, low(), Device::Cuda(0), format), gdw = GpuEmpty(c.w, DType::kF32);
      Tensor gdb = GpuEmpty({c.w[0]}, DType::kF32);
      Conv2dBackwardData(gpu_, c.p, device(dy), device(w), gdx);
      Conv2dBackwardWeights(gpu_, c.p, device(x), device(dy), gdw, c.bias ? &gdb : nullptr);
      EXPECT_TRUE(Near(gdx, dx)) << "backward data";
      EXPECT_TRUE(Near(gdw, dw)) << "backward weights (f32, [K, C, R, S])";
      if (c.bias) {
        EXPECT_TRUE(Near(gdb, db)) << "bias gradient (f32)";
      }
    }
  }
}

TEST_P(CudaLowPrecisionTest, ConvolutionsAndGemmsAccumulateInF32) {
  // 4608 products of ones per output: a 16-bit running sum stops far short.
  Tensor ones = Tensor::Empty({1, 512, 3, 3}, DType::kF32);
  ones.Fill(1.0);
  Tensor y = GpuEmpty({1, 1, 1, 1}, low());
  Conv2dForward(gpu_, testing::ConvParams(1, 0), Low(ones), Low(ones).View(0, {1, 512, 3, 3}), nullptr, y);
  EXPECT_EQ(OnCpu(y).GetAsDouble(0), 4608.0);
  Tensor row = Tensor::Empty({2, 4096}, DType::kF32), weights = Tensor::Empty({3, 4096}, DType::kF32);
  row.Fill(1.0);
  weights.Fill(1.0);
  Tensor sums = GpuEmpty({2, 3}, DType::kF32);
  LinearForward(gpu_, Low(row), Low(weights), nullptr, sums);
  const Tensor host = OnCpu(sums);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(host.GetAsDouble(i), 4096.0);
}

TEST_P(CudaLowPrecisionTest, LinearMatchesTheCpuInF32) {
  std::mt19937_64 rng(3);
  const Shape xs = {6, 300}, ws = {10, 300};
  Tensor x = Random(xs, rng), w = Random(ws, rng), b = Random({10}, rng);
  Tensor y = Tensor::Empty({6, 10}, DType::kF32), gy = GpuEmpty({6, 10}, DType::kF32);
  Tensor gb = OnGpu(b);
  LinearForward(cpu_, x, w, &b, y);
  LinearForward(gpu_, Low(x), Low(w), &gb, gy);  // f32 logits from 16-bit operands
  EXPECT_TRUE(Near(gy, y)) << "forward";
  Tensor dy = Random({6, 10}, rng), gdy = OnGpu(dy);
  Tensor dx = Tensor::Empty(xs, DType::kF32), dw = Tensor::Empty(ws, DType::kF32), db = Tensor::Empty({10}, DType::kF32);
  LinearBackwardData(cpu_, dy, w, &dx);
  LinearBackwardWeights(cpu_, x, dy, dw, &db);
  Tensor gdx = GpuEmpty(xs, low()), gdw = GpuEmpty(ws, DType::kF32), gdb = GpuEmpty({10}, DType::kF32);
  LinearBackwardData(gpu_, gdy, Low(w), &gdx);
  LinearBackwardWeights(gpu_, Low(x), gdy, gdw, &gdb);
  EXPECT_TRUE(Near(gdx, dx)) << "backward data";
  EXPECT_TRUE(Near(gdw, dw)) << "backward weights";
  EXPECT_TRUE(Near(gdb, db)) << "bias gradient";
}

TEST_P(CudaLowPrecisionTest, BatchNormKeepsF32StatisticsAndMatchesTheCpu) {
  const Device gd = Device::Cuda(0);
  for (const bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "bn + add + relu" : "bn");
    std::mt19937_64 rng(5);
    const Shape xs = {4, 8, 7, 5};
    Tensor x = Random(xs, rng), r = Random(xs, rng), gamma = Random({8}, rng), beta = Random({8}, rng);
    BatchNormParams p;
    auto stats = [](Device d) { return Tensor::Zeros({8}, DType::kF32, d); };
    Tensor y = Tensor::Empty(xs, DType::kF32), mean = stats(Device::Cpu()), invstd = stats(Device::Cpu());
    Tensor rm = stats(Device::Cpu()), rv = stats(Device::Cpu());
    BatchNormForwardTraining(cpu_, p, x, gamma, beta, y, mean, invstd, rm, rv, {fused ? &r : nullptr, fused});
    Tensor gg = OnGpu(gamma), gbeta = OnGpu(beta), gy = GpuEmpty(xs, low()), gr = Low(r);
    Tensor gmean = stats(gd), ginvstd = stats(gd), grm = stats(gd), grv = stats(gd);
    Tensor gx = Low(x);
    BatchNormForwardTraining(gpu_, p, gx, gg, gbeta, gy, gmean, ginvstd, grm, grv, {fused ? &gr : nullptr, fused});
    EXPECT_TRUE(Near(gy, y)) << "forward";
    EXPECT_TRUE(testing::AllClose(ToDoubles(OnCpu(gmean)), ToDoubles(mean), 1e-5, 1e-5)) << "f32 batch mean";
    EXPECT_TRUE(testing::AllClose(ToDoubles(OnCpu(grv)), ToDoubles(rv), 1e-5, 1e-5)) << "f32 running variance";
    Tensor dy = Random(xs, rng), y_mask = Low(y);
    Tensor dx = Tensor::Empty(xs, DType::kF32), dr = Tensor::Empty(xs, DType::kF32), dg = stats(Device::Cpu()),
           db = stats(Device::Cpu());
    BatchNormBackward(cpu_, p, x, dy, gamma, mean, invstd, dx, dg, db, {&y, fused ? &dr : nullptr, fused});
    Tensor gdx = GpuEmpty(xs, low()), gdr = GpuEmpty(xs, low()), gdg = stats(gd), gdb = stats(gd);
    BatchNormBackward(gpu_, p, gx, Low(dy), gg, gmean, ginvstd, gdx, gdg, gdb,
                      {&y_mask, fused ? &gdr : nullptr, fused});
    EXPECT_TRUE(Near(gdx, dx)) << "input gradient";
    EXPECT_TRUE(Near(gdg, dg)) << "weight gradient";
    EXPECT_TRUE(Near(gdb, db)) << "bias gradient";
    if (fused) {
      EXPECT_TRUE(Near(gdr, dr)) << "residual gradient";
    }
  }
}

TEST_P(CudaLowPrecisionTest, ElementwiseAndPoolingMatchTheCpu) {
  std::mt19937_64 rng(9);
  const Shape s = {2, 3, 9, 11};
  Tensor a = Random(s, rng), b = Random(s, rng);
  Tensor relu = a.Clone(), sum = Tensor::Empty(s, DType::kF32), drelu = Tensor::Empty(s, DType::kF32);
  ReluForward(cpu_, relu, relu);
  Add(cpu_, a, b, sum);
  ReluBackward(cpu_, relu, b, drelu);
  Tensor grelu = GpuEmpty(s, low()), gsum = GpuEmpty(s, low()), gdrelu = GpuEmpty(s, low());
  ReluForward(gpu_, Low(a), grelu);
  Add(gpu_, Low(a), Low(b), gsum);
  ReluBackward(gpu_, grelu, Low(b), gdrelu);
  EXPECT_TRUE(Near(grelu, relu)) << "ReLU";
  EXPECT_TRUE(Near(gsum, sum)) << "add";
  EXPECT_TRUE(Near(gdrelu, drelu)) << "ReLU backward";

  for (const testing::PoolCase& c : testing::PoolCases()) {
    SCOPED_TRACE(c.name);
    Tensor x = Random(c.x, rng);
    const Shape ys = Pool2dOutputShape(c.x, c.p);
    Tensor y = Tensor::Empty(ys, DType::kF32), argmax = Tensor::Empty(ys, DType::kI32);
    MaxPool2dForward(cpu_, c.p, x, y, argmax);
    Tensor gy = GpuEmpty(ys, low()), gargmax = GpuEmpty(ys, DType::kI32);
    MaxPool2dForward(gpu_, c.p, Low(x), gy, gargmax);
    EXPECT_TRUE(Near(gy, y)) << "max pool";
    Tensor dy = Random(ys, rng), dx = Tensor::Empty(c.x, DType::kF32), gdx = GpuEmpty(c.x, low());
    MaxPool2dBackward(cpu_, c.p, dy, argmax, dx);
    MaxPool2dBackward(gpu_, c.p, Low(dy), gargmax, gdx);
    EXPECT_TRUE(Near(gdx, dx)) << "max pool backward";
  }
  Tensor ones = Tensor::Empty({2, 3, 64, 64}, DType::kF32);
  ones.Fill(1.0);
  Tensor mean = GpuEmpty({2, 3}, low());
  GlobalAvgPoolForward(gpu_, Low(ones), mean);
  const Tensor host_mean = OnCpu(mean);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(host_mean.GetAsDouble(i), 1.0) << "4096 ones summed in f32";
  Tensor x = Random(s, rng), avg = Tensor::Empty({2, 3}, DType::kF32), gavg = GpuEmpty({2, 3}, low());
  GlobalAvgPoolForward(cpu_, x, avg);
  GlobalAvgPoolForward(gpu_, Low(x), gavg);
  EXPECT_TRUE(Near(gavg, avg)) << "global average pool";
  Tensor dx = Tensor::Empty(s, DType::kF32), gdx = GpuEmpty(s, low());
  GlobalAvgPoolBackward(cpu_, avg, dx);
  Tensor gavg16 = Low(avg.To(Device::Cpu()));
  GlobalAvgPoolBackward(gpu_, gavg16, gdx);
  EXPECT_TRUE(Near(gdx, dx)) << "global average pool backward";
}

// BERT's layer norm (f32 statistics and parameter gradients), GELU and
// tanh with 16-bit activations against the CPU's f32 ops.
TEST_P(CudaLowPrecisionTest, TransformerOpsMatchTheCpu) {
  std::mt19937_64 rng(17);
  const Shape s = {37, 96};
  Tensor x = Random(s, rng), dy = Random(s, rng), gamma = Random({96}, rng), beta = Random({96}, rng);
  Tensor y = Tensor::Empty(s, DType::kF32), mean = Tensor::Empty({37}, DType::kF32), rstd = Tensor::Empty({37}, DType::kF32);
  LayerNormForward(cpu_, x, gamma, beta, 1e-12, y, mean, rstd);
  Tensor gy = GpuEmpty(s, low()), gmean = GpuEmpty({37}, DType::kF32), grstd = GpuEmpty({37}, DType::kF32);
  LayerNormForward(gpu_, Low(x), OnGpu(gamma), OnGpu(beta), 1e-12, gy, gmean, grstd);
  EXPECT_TRUE(Near(gy, y)) << "layer norm";
  EXPECT_TRUE(Near(grstd, rstd)) << "layer norm statistics";
  Tensor dx = Tensor::Empty(s, DType::kF32), dg = Tensor::Empty({96}, DType::kF32), db = Tensor::Empty({96}, DType::kF32);
  LayerNormBackward(cpu_, x, dy, gamma, mean, rstd, dx, dg, db);
  Tensor gdx = GpuEmpty(s, low()), gdg = GpuEmpty({96}, DType::kF32), gdb = GpuEmpty({96}, DType::kF32);
  LayerNormBackward(gpu_, Low(x), Low(dy), OnGpu(gamma), gmean, grstd, gdx, gdg, gdb);
  EXPECT_TRUE(Near(gdx, dx)) << "layer norm backward";
  EXPECT_TRUE(Near(gdg, dg)) << "layer norm weight gradient";
  EXPECT_TRUE(Near(gdb, db)) << "layer norm bias gradient";

  Tensor gelu = Tensor::Empty(s, DType::kF32), ggelu = GpuEmpty(s, low());
  GeluForward(cpu_, x, gelu);
  GeluForward(gpu_, Low(x), ggelu);
  EXPECT_TRUE(Near(ggelu, gelu)) << "GELU";
  GeluBackward(cpu_, x, dy, gelu);
  GeluBackward(gpu_, Low(x), Low(dy), ggelu);
  EXPECT_TRUE(Near(ggelu, gelu)) << "GELU backward";
  Tensor tanh_y = Tensor::Empty(s, DType::kF32), gtanh = GpuEmpty(s, low());
  TanhForward(cpu_, x, tanh_y);
  TanhForward(gpu_, Low(x), gtanh);
  EXPECT_TRUE(Near(gtanh, tanh_y)) << "tanh";
  Tensor dtanh = Tensor::Empty(s, DType::kF32), gdtanh = GpuEmpty(s, low());
  TanhBackward(cpu_, tanh_y, dy, dtanh);
  TanhBackward(gpu_, gtanh, Low(dy), gdtanh);
  EXPECT_TRUE(Near(gdtanh, dtanh)) << "tanh backward";

  const Shape rows = {6 * 5, 4 * 8}, heads = {6 * 4, 5, 8};
  Tensor r = Random(rows, rng), split = Tensor::Empty(heads, DType::kF32), gsplit = GpuEmpty(heads, low());
  SplitHeads(cpu_, r, 4, split);
  SplitHeads(gpu_, Low(r), 4, gsplit);
  EXPECT_TRUE(Near(gsplit, split)) << "SplitHeads";
  Tensor gmerged = GpuEmpty(rows, low());
  MergeHeads(gpu_, gsplit, 4, gmerged);
  EXPECT_TRUE(Near(gmerged, r)) << "MergeHeads";
  // Dropout: the CPU's mask bit for bit, the values within 16-bit rounding.
  const DropoutKey key{/*seed=*/5, /*step=*/9, /*site=*/2};
  Tensor drop = Tensor::Empty(s, DType::kF32), keep = Tensor::Empty(s, DType::kU8);
  Tensor gdrop = GpuEmpty(s, low()), gkeep = GpuEmpty(s, DType::kU8);
  DropoutForward(cpu_, x, 0.3f, key, 11, drop, keep);
  DropoutForward(gpu_, Low(x), 0.3f, key, 11, gdrop, gkeep);
  EXPECT_TRUE(testing::SameBits(gkeep, keep)) << "dropout mask";
  EXPECT_TRUE(Near(gdrop, drop)) << "dropout";
  DropoutBackward(cpu_, dy, keep, 0.3f, drop);
  DropoutBackward(gpu_, Low(dy), gkeep, 0.3f, gdrop);
  EXPECT_TRUE(Near(gdrop, drop)) << "dropout backward";
}

// Attention in 16 bits: the batched products (one strided-batched call,
// 16-bit scores and context), the masked softmax and its backward in f32
// from 16-bit storage, and the row gather and scatter-add; then a hidden
// linear layer (16-bit output, 16-bit bias in cuBLASLt's epilogue) and the
// bias gradient summed from 16-bit output gradients.
TEST_P(CudaLowPrecisionTest, AttentionAndHiddenLinearMatchTheCpu) {
  std::mt19937_64 rng(23);
  const int64_t batch = 6, t = 9, d = 16;
  Tensor q = Random({batch, t, d}, rng), k = Random({batch, t, d}, rng);
  Tensor scores = Tensor::Empty({batch, t, t}, DType::kF32), gscores = GpuEmpty({batch, t, t}, low());
  BatchedGemm(cpu_, false, true, 0.25f, q, k, 0.0f, scores);
  BatchedGemm(gpu_, false, true, 0.25f, Low(q), Low(k), 0.0f, gscores);
  EXPECT_TRUE(Near(gscores, scores)) << "Q K^T";
  Tensor ctx_out = Tensor::Empty({batch, t, d}, DType::kF32), gctx = GpuEmpty({batch, t, d}, low());
  BatchedGemm(cpu_, true, false, 1.0f, scores, q, 0.0f, ctx_out);
  BatchedGemm(gpu_, true, false, 1.0f, gscores, Low(q), 0.0f, gctx);
  EXPECT_TRUE(Near(gctx, ctx_out)) << "S^T Q";

  const Shape s = {3, 2, t, t};
  Tensor mask = Tensor::FromVector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                             1, 1, 1, 1, 1, 0, 0, 0, 0,  //
                                             0, 0, 0, 0, 0, 0, 0, 0, 0},
                                            {3, t});
  Tensor probs = Tensor::Empty(s, DType::kF32), gprobs = GpuEmpty(s, low());
  // Both read the GPU's 16-bit scores, so they see the same inputs.
  const Tensor gscores4 = gscores.View(0, s), gmask = OnGpu(mask);
  MaskedSoftmaxForward(cpu_, ToF32Tensor(ToDoubles(OnCpu(gscores4)), s), &mask, probs);
  MaskedSoftmaxForward(gpu_, gscores4, &gmask, gprobs);
  EXPECT_TRUE(Near(gprobs, probs)) << "masked softmax";
  Tensor dprobs = Random(s, rng), dscores = Tensor::Empty(s, DType::kF32), gdscores = GpuEmpty(s, low());
  SoftmaxBackward(cpu_, probs, dprobs, dscores);
  SoftmaxBackward(gpu_, gprobs, Low(dprobs), gdscores);
  EXPECT_TRUE(Near(gdscores, dscores)) << "softmax backward";

  Tensor table = Random({12, 16}, rng), rows = Tensor::FromVector<int64_t>({4, 0, 9}, {3});
  Tensor gathered = Tensor::Empty({3, 16}, DType::kF32), ggathered = GpuEmpty({3, 16}, low());
  GatherRows(cpu_, table, rows, gathered);
  GatherRows(gpu_, Low(table), OnGpu(rows), ggathered);
  EXPECT_TRUE(Near(ggathered, gathered)) << "gather";
  Tensor back = Tensor::Empty({12, 16}, DType::kF32), gback = GpuEmpty({12, 16}, low());
  ScatterAddRows(cpu_, rows, gathered, back);
  ScatterAddRows(gpu_, OnGpu(rows), ggathered, gback);
  EXPECT_TRUE(Near(gback, back)) << "scatter-add";

  const Shape xs = {9, 64}, ws = {32, 64};
  Tensor x = Random(xs, rng), w = Random(ws, rng), b = Random({32}, rng);
  // The bias at an odd element of a flat buffer, as a view into the model's
  // 16-bit weight copy can be: the epilogue's misaligned-bias copy runs.
  Tensor padded = Tensor::Empty({33}, DType::kF32);
  padded.View(1, {32}).CopyFrom(b);
  Tensor gb = Low(padded).View(1, {32});
  Tensor y = Tensor::Empty({9, 32}, DType::kF32), gy = GpuEmpty({9, 32}, low());
  LinearForward(cpu_, x, w, &b, y);
  LinearForward(gpu_, Low(x), Low(w), &gb, gy);
  EXPECT_TRUE(Near(gy, y)) << "hidden linear, 16-bit output and a misaligned 16-bit bias";
  Tensor dy = Random({9, 32}, rng), dw = Tensor::Empty(ws, DType::kF32), db = Tensor::Empty({32}, DType::kF32);
  Tensor dx = Tensor::Empty(xs, DType::kF32), gdx = GpuEmpty(xs, low());
  LinearBackwardData(cpu_, dy, w, &dx);
  LinearBackwardData(gpu_, Low(dy), Low(w), &gdx);
  EXPECT_TRUE(Near(gdx, dx)) << "hidden linear's input gradient from 16-bit output gradients";
  LinearBackwardWeights(cpu_, x, dy, dw, &db);
  Tensor gdw = GpuEmpty(ws, DType::kF32), gdb = GpuEmpty({32}, DType::kF32);
  LinearBackwardWeights(gpu_, Low(x), Low(dy), gdw, &gdb);
  EXPECT_TRUE(Near(gdw, dw)) << "weight gradient from 16-bit output gradients";
  EXPECT_TRUE(Near(gdb, db)) << "bias gradient from 16-bit output gradients";
}

// The fused kernels on tensor cores (heads of 64) against the CPU's fused
// op in f32 on the same 16-bit values: one tile and several (130: a last
// tile of two keys), bert-base's 12 heads at 384, a sample all padding and
// one partly, with and without dropout; twice, bit for bit. The
// probabilities and dS are rounded to the 16-bit type for their products:
// within 1e-2 of the largest magnitude in bf16 (8 bits), 2e-3 in fp16 (11).
// Outputs start as NaN, so an element no kernel writes fails.
TEST_P(CudaLowPrecisionTest, FusedAttentionMatchesTheCpuInF32) {
  std::mt19937_64 rng(31);
  const double tolerance = low() == DType::kBF16 ? 1e-2 : 2e-3;
  auto near = [&](const Tensor& gpu, const Tensor& cpu) {
    const std::vector<double> c = ToDoubles(cpu);
    double scale = 0.0;
    for (double v : c) scale = std::max(scale, std::fabs(v));
    return testing::AllClose(ToDoubles(OnCpu(gpu)), c, 0.0, tolerance * scale);
  };
  auto nan_like = [&](const Shape& shape) {
    Tensor out = GpuEmpty(shape, low());
    CastScaled(gpu_, OnGpu(ToF32Tensor(std::vector<double>(NumElements(shape), std::nan("")), shape)), 1.0f, out);
    return out;
  };
  struct Case {
    int64_t samples, heads, t;
  };
  for (const Case& c : {Case{3, 2, 33}, Case{3, 2, 130}, Case{2, 12, 384}}) {
    const Shape shape = {c.samples * c.heads, c.t, 64};
    const Tensor q = Random(shape, rng), k = Random(shape, rng), v = Random(shape, rng), dc = Random(shape, rng);
    std::vector<int64_t> keys(c.samples * c.t, 1);
    for (int64_t j = 0; j < c.t; ++j) keys[j] = 0;
    for (int64_t j = c.t / 3; j < c.t; ++j) keys[c.t + j] = 0;
    const Tensor mask = Tensor::FromVector<int64_t>(keys, {c.samples, c.t}), gmask = OnGpu(mask);
    for (const float p : {0.0f, 0.1f}) {
      SCOPED_TRACE("t " + std::to_string(c.t) + ", dropout " + std::to_string(p) + ", " + DTypeName(low()));
      const DropoutKey key{11, 2, 6};
      Tensor context = Tensor::Empty(shape, DType::kF32);
      AttentionSaved saved;
      AttentionForward(cpu_, q, k, v, c.samples, &mask, p, key, 0, context, &saved);
      Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
             dv = Tensor::Empty(shape, DType::kF32);
      AttentionBackward(cpu_, q, k, v, saved, dc, dq, dk, dv);
      Tensor first[4];
      for (int run = 0; run < 2; ++run) {
        Tensor gcontext = nan_like(shape);
        AttentionSaved gsaved;
        AttentionForward(gpu_, Low(q), Low(k), Low(v), c.samples, &gmask, p, key, 0, gcontext, &gsaved);
        Tensor gdq = nan_like(shape), gdk = nan_like(shape), gdv = nan_like(shape);
        AttentionBackward(gpu_, Low(q), Low(k), Low(v), gsaved, Low(dc), gdq, gdk, gdv);
        const Tensor got[4] = {gcontext, gdq, gdk, gdv};
        if (run == 1) {
          for (int i = 0; i < 4; ++i) EXPECT_TRUE(testing::SameBits(got[i], first[i])) << "output " << i << " repeats";
          continue;
        }
        EXPECT_TRUE(near(gcontext, context)) << "forward";
        EXPECT_TRUE(near(gdq, dq)) << "dq";
        EXPECT_TRUE(near(gdk, dk)) << "dk";
        EXPECT_TRUE(near(gdv, dv)) << "dv";
        for (int i = 0; i < 4; ++i) first[i] = OnCpu(got[i]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaLowPrecisionTest, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace ddp
