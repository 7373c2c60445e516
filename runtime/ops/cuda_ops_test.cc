// Every CUDA op against its CPU op, on the shapes the CPU tests use (strides,
// padding, dilation, groups, odd sizes) and random inputs. Differences are
// measured relative to the CPU output's largest magnitude: elementwise ops
// within 1e-6; convolutions, GEMMs and reductions in fp32 within 1e-4
// (cuDNN may pick Winograd or FFT); TF32 within 5e-3. With
// --deterministic-style contexts, repeated runs are bitwise equal. NaN
// propagates as on the CPU. Reports SKIPPED without a GPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/transformer.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/op_cases.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::RandomValues;
using testing::ToDoubles;
using testing::OnCpu;
using testing::OnGpu;
using testing::SameBits;
using testing::ToF32Tensor;

constexpr double kElementwise = 1e-6, kFp32 = 1e-4, kTf32 = 5e-3;



// max |gpu - cpu| / max |cpu| (absolute when the CPU output is all zero);
// NaN where either holds a NaN the other does not.
::testing::AssertionResult Near(const Tensor& gpu, const Tensor& cpu, double tolerance) {
  const std::vector<double> g = ToDoubles(OnCpu(gpu)), c = ToDoubles(cpu);
  if (g.size() != c.size()) return ::testing::AssertionFailure() << "sizes differ";
  double scale = 0.0, worst = 0.0;
  int64_t worst_at = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c[i]) != std::isnan(g[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": gpu " << g[i] << ", cpu " << c[i];
    }
    if (!std::isnan(c[i])) scale = std::max(scale, std::fabs(c[i]));
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c[i])) continue;
    const double d = std::fabs(g[i] - c[i]);
    if (d > worst) {
      worst = d;
      worst_at = static_cast<int64_t>(i);
    }
  }
  const double relative = scale > 0.0 ? worst / scale : worst;
  if (relative <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "worst relative difference " << relative << " > " << tolerance
                                       << " at element " << worst_at << ": gpu " << g[worst_at] << ", cpu "
                                       << c[worst_at];
}

Tensor Random(const Shape& shape, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  return ToF32Tensor(RandomValues(NumElements(shape), rng, lo, hi), shape);
}

// An f32 GPU tensor of NaN: an output element a kernel fails to write
// stays NaN and fails the comparison.
Tensor GpuNan(const Shape& shape) {
  return OnGpu(ToF32Tensor(std::vector<double>(NumElements(shape), std::nan("")), shape));
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
    cuda::SetDevice(0);
  }
  ExecutionContext Gpu(bool tf32 = false, bool deterministic = false) {
    ExecutionContext ctx = ExecutionContext::Cuda(0, nullptr);
    ctx.set_allow_tf32(tf32);
    ctx.set_deterministic(deterministic);
    return ctx;
  }
  ExecutionContext cpu_ = ExecutionContext::Cpu(2);
};

// ---------------------------------------------------------------- conv2d

using testing::ConvCase;
using testing::PoolCase;

Conv2dParams P(int64_t stride, int64_t pad) { return testing::ConvParams(stride, pad); }

// The CPU tests' cases, and ResNet-50-sized ones.
std::vector<ConvCase> ConvCases() {
  std::vector<ConvCase> cases = testing::ConvCases();
  cases.push_back({"resnet50_3x3", {4, 64, 28, 28}, {64, 64, 3, 3}, P(1, 1), false});
  cases.push_back({"resnet50_1x1_down", {4, 256, 28, 28}, {512, 256, 1, 1}, P(2, 0), false});
  return cases;
}

void CheckConv(CudaOpsTest* test, ExecutionContext& cpu, ExecutionContext gpu, const ConvCase& c, double tolerance) {
  SCOPED_TRACE(std::string(c.name) + (gpu.allow_tf32() ? " tf32" : " fp32") +
               (gpu.deterministic() ? " deterministic" : ""));
  std::mt19937_64 rng(42);
  Tensor x = Random(c.x, rng), w = Random(c.w, rng), b = Random({c.w[0]}, rng);
  const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
  Tensor y = Tensor::Empty(ys, DType::kF32), gy = Tensor::Empty(ys, DType::kF32, Device::Cuda(0));
  Tensor gx = OnGpu(x), gw = OnGpu(w), gb = OnGpu(b);
  Conv2dForward(cpu, c.p, x, w, c.bias ? &b : nullptr, y);
  Conv2dForward(gpu, c.p, gx, gw, c.bias ? &gb : nullptr, gy);
  EXPECT_TRUE(Near(gy, y, tolerance)) << "forward";

  Tensor dy = Random(ys, rng), gdy = OnGpu(dy);
  Tensor dx = Tensor::Empty(c.x, DType::kF32), gdx = Tensor::Empty(c.x, DType::kF32, Device::Cuda(0));
  Conv2dBackwardData(cpu, c.p, dy, w, dx);
  Conv2dBackwardData(gpu, c.p, gdy, gw, gdx);
  EXPECT_TRUE(Near(gdx, dx, tolerance)) << "backward data";

  Tensor dw = Tensor::Empty(c.w, DType::kF32), gdw = Tensor::Empty(c.w, DType::kF32, Device::Cuda(0));
  Tensor db = Tensor::Empty({c.w[0]}, DType::kF32), gdb = Tensor::Empty({c.w[0]}, DType::kF32, Device::Cuda(0));
  Conv2dBackwardWeights(cpu, c.p, x, dy, dw, c.bias ? &db : nullptr);
  Conv2dBackwardWeights(gpu, c.p, gx, gdy, gdw, c.bias ? &gdb : nullptr);
  EXPECT_TRUE(Near(gdw, dw, tolerance)) << "backward weights";
  if (c.bias) {
    EXPECT_TRUE(Near(gdb, db, tolerance)) << "bias gradient";
  }
  (void)test;
}

TEST_F(CudaOpsTest, Conv2dFp32MatchesCpu) {
  for (const ConvCase& c : ConvCases()) CheckConv(this, cpu_, Gpu(), c, kFp32);
}

TEST_F(CudaOpsTest, Conv2dDeterministicMatchesCpuAndRepeats) {
  for (const ConvCase& c : ConvCases()) CheckConv(this, cpu_, Gpu(false, true), c, kFp32);
  // The same inputs twice: bit for bit the same gradients.
  ExecutionContext gpu = Gpu(false, true);
  const ConvCase c = ConvCases().back();
  std::mt19937_64 rng(7);
  Tensor gx = OnGpu(Random(c.x, rng));
  const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
  Tensor gdy = OnGpu(Random(ys, rng)), gw = OnGpu(Random(c.w, rng));
  Tensor a = Tensor::Empty(c.w, DType::kF32, Device::Cuda(0)), b = Tensor::Empty(c.w, DType::kF32, Device::Cuda(0));
  Conv2dBackwardWeights(gpu, c.p, gx, gdy, a, nullptr);
  Conv2dBackwardWeights(gpu, c.p, gx, gdy, b, nullptr);
  EXPECT_TRUE(SameBits(a, b));
  Tensor da = Tensor::Empty(c.x, DType::kF32, Device::Cuda(0)), dd = Tensor::Empty(c.x, DType::kF32, Device::Cuda(0));
  Conv2dBackwardData(gpu, c.p, gdy, gw, da);
  Conv2dBackwardData(gpu, c.p, gdy, gw, dd);
  EXPECT_TRUE(SameBits(da, dd));
}

TEST_F(CudaOpsTest, Conv2dTf32MatchesCpu) {
  for (const ConvCase& c : ConvCases()) CheckConv(this, cpu_, Gpu(true), c, kTf32);
}

// ------------------------------------------------------------ batch norm

// Own kernels (batch_norm_cuda.h), NCHW and channels-last, with each fused
// epilogue. The GPU's backward masks by the CPU forward's output, so a
// value within rounding of zero cannot fall on different sides of the ReLU.
TEST_F(CudaOpsTest, BatchNormMatchesCpu) {
  ExecutionContext gpu = Gpu();
  struct Fusion {
    bool residual, relu;
  };
  for (const Shape& xs : {Shape{4, 3, 5, 5}, Shape{8, 6}, Shape{2, 16, 3, 4}, Shape{3, 2, 1, 1}, Shape{8, 64, 14, 14},
                          Shape{2, 100, 33, 3}}) {
    for (const bool channels_last : {false, true}) {
      if (channels_last && xs.size() != 4) continue;
      for (const Fusion f : {Fusion{false, false}, Fusion{false, true}, Fusion{true, false}, Fusion{true, true}}) {
        SCOPED_TRACE(ShapeToString(xs) + (channels_last ? " channels-last" : "") + (f.residual ? " +residual" : "") +
                     (f.relu ? " +relu" : ""));
        std::mt19937_64 rng(5);
        const int64_t c = xs[1];
        auto in_format = [&](const Tensor& t) {
          if (!channels_last) return t;
          Tensor out = Tensor::Empty(t.shape(), t.dtype(), Device::Cpu(), MemoryFormat::kChannelsLast);
          ConvertLayout(cpu_, t, out);
          return out;
        };
        auto like = [&](const Tensor& t, Device d) { return Tensor::Empty(t.shape(), t.dtype(), d, t.format()); };
        const Device gd = Device::Cuda(0);
        Tensor x = in_format(Random(xs, rng, -2.0, 3.0)), r = in_format(Random(xs, rng));
        Tensor gamma = Random({c}, rng), beta = Random({c}, rng);
        Tensor rm = Random({c}, rng), rv = Random({c}, rng, 0.5, 2.0);
        Tensor grm = OnGpu(rm), grv = OnGpu(rv);
        Tensor y = like(x, Device::Cpu()), mean = Tensor::Empty({c}, DType::kF32),
               invstd = Tensor::Empty({c}, DType::kF32);
        Tensor gy = like(x, gd), gmean = Tensor::Empty({c}, DType::kF32, gd), ginvstd = Tensor::Empty({c}, DType::kF32, gd);
        Tensor gx = OnGpu(x), gr = OnGpu(r), ggamma = OnGpu(gamma), gbeta = OnGpu(beta);
        const BatchNormEpilogue e{f.residual ? &r : nullptr, f.relu}, ge{f.residual ? &gr : nullptr, f.relu};
        BatchNormForwardTraining(cpu_, BatchNormParams(), x, gamma, beta, y, mean, invstd, rm, rv, e);
        BatchNormForwardTraining(gpu, BatchNormParams(), gx, ggamma, gbeta, gy, gmean, ginvstd, grm, grv, ge);
        EXPECT_TRUE(Near(gy, y, kFp32)) << "output";
        EXPECT_TRUE(Near(gmean, mean, kFp32)) << "saved mean";
        EXPECT_TRUE(Near(ginvstd, invstd, kFp32)) << "saved invstd";
        EXPECT_TRUE(Near(grm, rm, kFp32)) << "running mean";
        EXPECT_TRUE(Near(grv, rv, kFp32)) << "running var (unbiased)";

        Tensor dy = in_format(Random(xs, rng)), gdy = OnGpu(dy), y_mask = OnGpu(y);
        Tensor dx = like(x, Device::Cpu()), dr = like(x, Device::Cpu()), dg = Tensor::Empty({c}, DType::kF32),
               db = Tensor::Empty({c}, DType::kF32);
        Tensor gdx = like(x, gd), gdr = like(x, gd), gdg = Tensor::Empty({c}, DType::kF32, gd),
               gdb = Tensor::Empty({c}, DType::kF32, gd);
        BatchNormBackward(cpu_, BatchNormParams(), x, dy, gamma, mean, invstd, dx, dg, db,
                          {&y, f.residual ? &dr : nullptr, f.relu});
        BatchNormBackward(gpu, BatchNormParams(), gx, gdy, ggamma, gmean, ginvstd, gdx, gdg, gdb,
                          {&y_mask, f.residual ? &gdr : nullptr, f.relu});
        EXPECT_TRUE(Near(gdx, dx, kFp32)) << "input gradient";
        EXPECT_TRUE(Near(gdg, dg, kFp32)) << "weight gradient";
        EXPECT_TRUE(Near(gdb, db, kFp32)) << "bias gradient";
        if (f.residual) {
          EXPECT_TRUE(Near(gdr, dr, 0.0)) << "residual gradient: a select, exact";
        }

        BatchNormForwardInference(cpu_, BatchNormParams(), x, gamma, beta, rm, rv, y, e);
        BatchNormForwardInference(gpu, BatchNormParams(), gx, ggamma, gbeta, grm, grv, gy, ge);
        EXPECT_TRUE(Near(gy, y, kFp32)) << "inference";
      }
    }
  }
}

// --------------------------------------------------------------- pooling

Pool2dParams Pool(int64_t k, int64_t s, int64_t pad, bool count_include_pad = true) {
  return testing::PoolParams(k, s, pad, count_include_pad);
}

Tensor InFormat(ExecutionContext& cpu, const Tensor& t, bool channels_last) {
  Tensor out = Tensor::Empty(t.shape(), t.dtype(), Device::Cpu(),
                             channels_last ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous);
  ConvertLayout(cpu, t, out);
  return out;
}

// NCHW and channels-last (max and global average pooling; average pooling
// is NCHW only).
TEST_F(CudaOpsTest, PoolingMatchesCpu) {
  ExecutionContext gpu = Gpu();
  const Device gd = Device::Cuda(0);
  std::vector<PoolCase> cases = testing::PoolCases();
  cases.push_back({"count_exclude_pad", {2, 2, 7, 7}, Pool(3, 2, 1, false)});
  cases.push_back({"resnet50_stem", {8, 64, 112, 112}, Pool(3, 2, 1)});
  for (const bool cl : {false, true}) {
    for (const PoolCase& c : cases) {
      SCOPED_TRACE(std::string(c.name) + (cl ? " channels-last" : ""));
      std::mt19937_64 rng(3);
      const MemoryFormat format = cl ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous;
      Tensor x = InFormat(cpu_, Random(c.x, rng, -2.0, 2.0), cl), gx = OnGpu(x);
      const Shape ys = Pool2dOutputShape(c.x, c.p);
      Tensor y = Tensor::Empty(ys, DType::kF32, Device::Cpu(), format), am = Tensor::Empty(ys, DType::kI32);
      Tensor gy = Tensor::Empty(ys, DType::kF32, gd, format), gam = Tensor::Empty(ys, DType::kI32, gd);
      MaxPool2dForward(cpu_, c.p, x, y, am);
      MaxPool2dForward(gpu, c.p, gx, gy, gam);
      EXPECT_TRUE(Near(gy, y, 0.0)) << "max forward";
      EXPECT_TRUE(SameBits(gam, OnGpu(am))) << "argmax (in the output's memory order)";
      Tensor dy = InFormat(cpu_, Random(ys, rng), cl), gdy = OnGpu(dy);
      Tensor dx = Tensor::Empty(c.x, DType::kF32, Device::Cpu(), format), gdx = Tensor::Empty(c.x, DType::kF32, gd, format);
      MaxPool2dBackward(cpu_, c.p, dy, am, dx);
      MaxPool2dBackward(gpu, c.p, gdy, gam, gdx);
      EXPECT_TRUE(Near(gdx, dx, kElementwise)) << "max backward";
      if (!cl) {
        AvgPool2dForward(cpu_, c.p, x, y);
        AvgPool2dForward(gpu, c.p, gx, gy);
        EXPECT_TRUE(Near(gy, y, kElementwise)) << "avg forward";
        AvgPool2dBackward(cpu_, c.p, dy, dx);
        AvgPool2dBackward(gpu, c.p, gdy, gdx);
        EXPECT_TRUE(Near(gdx, dx, kElementwise)) << "avg backward";
      }
      Tensor g = Tensor::Empty({c.x[0], c.x[1]}, DType::kF32), gg = Tensor::Empty({c.x[0], c.x[1]}, DType::kF32, gd);
      GlobalAvgPoolForward(cpu_, x, g);
      GlobalAvgPoolForward(gpu, gx, gg);
      EXPECT_TRUE(Near(gg, g, kFp32)) << "global forward";
      Tensor dg = Random({c.x[0], c.x[1]}, rng);
      GlobalAvgPoolBackward(cpu_, dg, dx);
      GlobalAvgPoolBackward(gpu, OnGpu(dg), gdx);
      EXPECT_TRUE(Near(gdx, dx, kElementwise)) << "global backward";
    }
  }
}

// ---------------------------------------------------------- channels-last

// NHWC activations with [K, R, S, C] weights on cuDNN against the CPU's
// NHWC convolutions; the weight gradient lands in the f32 [K, C, R, S]
// master layout. The layout conversion between both formats.
TEST_F(CudaOpsTest, ChannelsLastMatchesCpu) {
  ExecutionContext gpu = Gpu();
  const Device gd = Device::Cuda(0);
  auto empty_like = [](const Shape& s, const Tensor& format_of, Device d) {
    return Tensor::Empty(s, DType::kF32, d, format_of.format());
  };
  for (const ConvCase& c : ConvCases()) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(42);
    Tensor x = InFormat(cpu_, Random(c.x, rng), true), w = Random(c.w, rng), b = Random({c.w[0]}, rng);
    Tensor wl = InFormat(cpu_, w, true);
    const Shape ys = Conv2dOutputShape(c.x, c.w, c.p);
    Tensor y = empty_like(ys, x, Device::Cpu()), gy = empty_like(ys, x, gd);
    Tensor gx = OnGpu(x), gwl = OnGpu(wl), gb = OnGpu(b);
    Conv2dForward(cpu_, c.p, x, w, c.bias ? &b : nullptr, y);
    Conv2dForward(gpu, c.p, gx, gwl, c.bias ? &gb : nullptr, gy);
    EXPECT_TRUE(Near(gy, y, kFp32)) << "forward";
    Tensor dy = InFormat(cpu_, Random(ys, rng), true), gdy = OnGpu(dy);
    Tensor dx = empty_like(c.x, x, Device::Cpu()), gdx = empty_like(c.x, x, gd);
    Conv2dBackwardData(cpu_, c.p, dy, w, dx);
    Conv2dBackwardData(gpu, c.p, gdy, gwl, gdx);
    EXPECT_TRUE(Near(gdx, dx, kFp32)) << "backward data";
    Tensor dw = Tensor::Empty(c.w, DType::kF32), gdw = Tensor::Empty(c.w, DType::kF32, gd);
    Tensor db = Tensor::Empty({c.w[0]}, DType::kF32), gdb = Tensor::Empty({c.w[0]}, DType::kF32, gd);
    Conv2dBackwardWeights(cpu_, c.p, x, dy, dw, c.bias ? &db : nullptr);
    Conv2dBackwardWeights(gpu, c.p, gx, gdy, gdw, c.bias ? &gdb : nullptr);
    EXPECT_TRUE(Near(gdw, dw, kFp32)) << "backward weights, rearranged into [K, C, R, S]";
    if (c.bias) {
      EXPECT_TRUE(Near(gdb, db, kFp32)) << "bias gradient";
    }
  }
  std::mt19937_64 rng(8);
  const Tensor t = Random({3, 5, 4, 7}, rng);
  for (const bool from_cl : {false, true}) {
    for (const bool to_cl : {false, true}) {
      const Tensor src = InFormat(cpu_, t, from_cl);
      Tensor dst = InFormat(cpu_, t, to_cl), gdst = empty_like(t.shape(), dst, gd);
      ConvertLayout(gpu, OnGpu(src), gdst);
      EXPECT_TRUE(SameBits(gdst, OnGpu(dst))) << "ConvertLayout " << from_cl << " -> " << to_cl;
    }
  }
}

TEST_F(CudaOpsTest, ChannelsLastDataWithNchwWeightsIsRefused) {
  ExecutionContext gpu = Gpu();
  const Device gd = Device::Cuda(0);
  Tensor x = Tensor::Zeros({1, 4, 5, 5}, DType::kF32, gd).View(0, {1, 4, 5, 5}, MemoryFormat::kChannelsLast);
  Tensor w = Tensor::Zeros({2, 4, 3, 3}, DType::kF32, gd);
  Tensor y = Tensor::Empty({1, 2, 3, 3}, DType::kF32, gd, MemoryFormat::kChannelsLast);
  EXPECT_DEATH(Conv2dForward(gpu, P(1, 0), x, w, nullptr, y), "channels-last data needs channels-last");
}

// ------------------------------------------------------- linear and GEMM

TEST_F(CudaOpsTest, LinearAndGemmMatchCpu) {
  for (bool tf32 : {false, true}) {
    ExecutionContext gpu = Gpu(tf32, !tf32);
    const double tolerance = tf32 ? kTf32 : kFp32;
    struct Case {
      int64_t n, in, out;
      bool bias;
    };
    for (const Case& c : {Case{5, 7, 3, true}, Case{1, 1, 1, false}, Case{33, 65, 17, true}, Case{8, 128, 10, false},
                          Case{64, 2048, 1000, true},
                          // bert-tiny's: small f32 GEMMs whose heuristics offer only split-K on Hopper
                          Case{16, 128, 128, true}, Case{128, 128, 512, true}, Case{128, 512, 128, true}}) {
      SCOPED_TRACE(std::to_string(c.n) + "x" + std::to_string(c.in) + "->" + std::to_string(c.out) +
                   (tf32 ? " tf32" : " fp32"));
      std::mt19937_64 rng(11);
      Tensor x = Random({c.n, c.in}, rng), w = Random({c.out, c.in}, rng), b = Random({c.out}, rng);
      Tensor gx = OnGpu(x), gw = OnGpu(w), gb = OnGpu(b);
      Tensor y = Tensor::Empty({c.n, c.out}, DType::kF32), gy = Tensor::Empty({c.n, c.out}, DType::kF32, Device::Cuda(0));
      LinearForward(cpu_, x, w, c.bias ? &b : nullptr, y);
      LinearForward(gpu, gx, gw, c.bias ? &gb : nullptr, gy);
      EXPECT_TRUE(Near(gy, y, tolerance)) << "forward";
      Tensor dy = Random({c.n, c.out}, rng), gdy = OnGpu(dy);
      Tensor dx = Tensor::Empty({c.n, c.in}, DType::kF32), gdx = Tensor::Empty({c.n, c.in}, DType::kF32, Device::Cuda(0));
      LinearBackwardData(cpu_, dy, w, &dx);
      LinearBackwardData(gpu, gdy, gw, &gdx);
      EXPECT_TRUE(Near(gdx, dx, tolerance)) << "backward data";
      Tensor dw = Tensor::Empty({c.out, c.in}, DType::kF32), gdw = Tensor::Empty({c.out, c.in}, DType::kF32, Device::Cuda(0));
      Tensor db = Tensor::Empty({c.out}, DType::kF32), gdb = Tensor::Empty({c.out}, DType::kF32, Device::Cuda(0));
      LinearBackwardWeights(cpu_, x, dy, dw, c.bias ? &db : nullptr);
      LinearBackwardWeights(gpu, gx, gdy, gdw, c.bias ? &gdb : nullptr);
      EXPECT_TRUE(Near(gdw, dw, tolerance)) << "backward weights";
      if (!tf32) {  // deterministic: the same bits again
        Tensor again = Tensor::Empty({c.out, c.in}, DType::kF32, Device::Cuda(0));
        LinearBackwardWeights(gpu, gx, gdy, again, nullptr);
        EXPECT_TRUE(SameBits(again, gdw)) << "backward weights, repeated";
      }
      if (c.bias) {
        EXPECT_TRUE(Near(gdb, db, kFp32)) << "bias gradient";
      }
    }
    // Every transpose combination, with beta accumulating into C.
    std::mt19937_64 rng(13);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string("gemm ") + (ta ? "T" : "N") + (tb ? "T" : "N"));
        const int64_t m = 37, n = 29, k = 53;
        Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, rng), b = Random(tb ? Shape{n, k} : Shape{k, n}, rng);
        Tensor c = Random({m, n}, rng), gc = OnGpu(c);
        Gemm(cpu_, ta, tb, 0.5f, a, b, 2.0f, c);
        Gemm(gpu, ta, tb, 0.5f, OnGpu(a), OnGpu(b), 2.0f, gc);
        EXPECT_TRUE(Near(gc, c, tolerance));
        // A strided batch in one cuBLASLt call against the CPU's matrix by matrix.
        const int64_t batch = 3;
        Tensor ba = Random(ta ? Shape{batch, k, m} : Shape{batch, m, k}, rng);
        Tensor bb = Random(tb ? Shape{batch, n, k} : Shape{batch, k, n}, rng);
        Tensor bc = Random({batch, m, n}, rng), gbc = OnGpu(bc);
        BatchedGemm(cpu_, ta, tb, 0.5f, ba, bb, 2.0f, bc);
        BatchedGemm(gpu, ta, tb, 0.5f, OnGpu(ba), OnGpu(bb), 2.0f, gbc);
        EXPECT_TRUE(Near(gbc, bc, tolerance)) << "batched";
      }
    }
  }
}

// ------------------------------------------------------ loss, reductions

TEST_F(CudaOpsTest, CrossEntropyMatchesCpu) {
  ExecutionContext gpu = Gpu();
  struct Case {
    int64_t n, c;
    double smoothing;
    std::vector<int64_t> labels;
  };
  for (const Case& c : {Case{4, 5, 0.0, {0, 4, 2, 2}}, Case{4, 5, 0.1, {1, 3, 0, 4}},
                        Case{5, 3, 0.2, {2, -100, 0, -100, 1}}, Case{1, 1000, 0.1, {999}},
                        Case{2, 3, 0.0, {-100, -100}}}) {
    SCOPED_TRACE(std::to_string(c.n) + "x" + std::to_string(c.c));
    std::mt19937_64 rng(17);
    CrossEntropyParams p;
    p.label_smoothing = c.smoothing;
    Tensor logits = Random({c.n, c.c}, rng, -4.0, 4.0), labels = Tensor::FromVector<int64_t>(c.labels, {c.n});
    Tensor probs = Tensor::Empty({c.n, c.c}, DType::kF32), gprobs = Tensor::Empty({c.n, c.c}, DType::kF32, Device::Cuda(0));
    Tensor glabels = OnGpu(labels);
    const CrossEntropyResult want = SoftmaxCrossEntropyForward(cpu_, p, logits, labels, probs);
    const CrossEntropyResult got = SoftmaxCrossEntropyForward(gpu, p, OnGpu(logits), glabels, gprobs);
    EXPECT_EQ(got.counted, want.counted);
    if (std::isnan(want.loss)) {
      EXPECT_TRUE(std::isnan(got.loss));
    } else {
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::max(1.0, std::fabs(want.loss)));
    }
    EXPECT_TRUE(Near(gprobs, probs, kElementwise)) << "probabilities";
    Tensor d = Tensor::Empty({c.n, c.c}, DType::kF32), gd = Tensor::Empty({c.n, c.c}, DType::kF32, Device::Cuda(0));
    SoftmaxCrossEntropyBackward(cpu_, p, probs, labels, 0.25, d);
    SoftmaxCrossEntropyBackward(gpu, p, gprobs, glabels, 0.25, gd);
    EXPECT_TRUE(Near(gd, d, kElementwise)) << "gradient";
  }
}

TEST_F(CudaOpsTest, ReductionsMatchCpu) {
  ExecutionContext gpu = Gpu();
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{(1 << 22) + 3}}) {
    std::mt19937_64 rng(n);
    Tensor x = Random({n}, rng), gx = OnGpu(x);
    EXPECT_NEAR(Sum(gpu, gx), Sum(cpu_, x), 1e-9 * n);
    EXPECT_NEAR(SumOfSquares(gpu, gx), SumOfSquares(cpu_, x), 1e-9 * n);
    EXPECT_TRUE(AllFinite(gpu, gx));
    x.data<float>()[n - 1] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(AllFinite(gpu, OnGpu(x)));
    x.data<float>()[n - 1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(AllFinite(gpu, OnGpu(x)));
    EXPECT_TRUE(std::isnan(Sum(gpu, OnGpu(x))));
  }
}

// -------------------------------------------- elementwise, copies, fills

TEST_F(CudaOpsTest, CopiesFillsCastsAndCounters) {
  ExecutionContext gpu = Gpu();
  std::mt19937_64 rng(19);
  const int64_t n = 100003;
  Tensor x = Random({n}, rng, -100.0, 100.0), gx = OnGpu(x);
  EXPECT_TRUE(Near(gx, x, 0.0)) << "host -> device -> host";
  Tensor gy = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  Copy(gpu, gx, gy);
  EXPECT_TRUE(Near(gy, x, 0.0)) << "device copy";
  for (double value : {0.0, 1.5, -3.25}) {
    Tensor f = Tensor::Empty({n}, DType::kF32), gf = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
    f.Fill(value);
    gf.Fill(value);
    EXPECT_TRUE(Near(gf, f, 0.0)) << "fill " << value;
  }
  Tensor counter = Tensor::Zeros({}, DType::kI64, Device::Cuda(0));
  for (int i = 0; i < 3; ++i) Increment(gpu, counter);
  EXPECT_EQ(OnCpu(counter).data<int64_t>()[0], 3);
  for (DType half : {DType::kBF16, DType::kF16}) {
    Tensor h = Tensor::Empty({n}, half), gh = Tensor::Empty({n}, half, Device::Cuda(0));
    CastScaled(cpu_, x, 0.5f, h);
    CastScaled(gpu, gx, 0.5f, gh);
    EXPECT_TRUE(SameBits(gh, OnGpu(h))) << DTypeName(half) << " rounding";
    Tensor back = Tensor::Empty({n}, DType::kF32), gback = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
    CastScaled(cpu_, h, 2.0f, back);
    CastScaled(gpu, gh, 2.0f, gback);
    EXPECT_TRUE(Near(gback, back, 0.0)) << DTypeName(half) << " widening";
  }
}

// ------------------------------------------------------ NaN propagation

TEST_F(CudaOpsTest, NaNPropagatesAsOnCpu) {
  ExecutionContext gpu = Gpu();
  std::mt19937_64 rng(23);
  Tensor x = Random({2, 3, 8, 8}, rng);
  x.data<float>()[64 + 3 * 8 + 3] = std::numeric_limits<float>::quiet_NaN();  // sample 0, channel 1
  Tensor gx = OnGpu(x);
  Tensor w = Random({4, 3, 3, 3}, rng), y = Tensor::Empty({2, 4, 8, 8}, DType::kF32),
         gy = Tensor::Empty({2, 4, 8, 8}, DType::kF32, Device::Cuda(0));
  Conv2dForward(cpu_, P(1, 1), x, w, nullptr, y);
  Conv2dForward(gpu, P(1, 1), gx, OnGpu(w), nullptr, gy);
  EXPECT_TRUE(Near(gy, y, kFp32)) << "conv";
  Tensor r = Tensor::Empty(x.shape(), DType::kF32), gr = Tensor::Empty(x.shape(), DType::kF32, Device::Cuda(0));
  ReluForward(cpu_, x, r);
  ReluForward(gpu, gx, gr);
  EXPECT_TRUE(Near(gr, r, 0.0)) << "relu";
  const Shape ps = Pool2dOutputShape(x.shape(), Pool(3, 2, 1));
  Tensor m = Tensor::Empty(ps, DType::kF32), am = Tensor::Empty(ps, DType::kI32);
  Tensor gm = Tensor::Empty(ps, DType::kF32, Device::Cuda(0)), gam = Tensor::Empty(ps, DType::kI32, Device::Cuda(0));
  MaxPool2dForward(cpu_, Pool(3, 2, 1), x, m, am);
  MaxPool2dForward(gpu, Pool(3, 2, 1), gx, gm, gam);
  EXPECT_TRUE(Near(gm, m, 0.0)) << "max pool";
  Tensor gamma = Random({3}, rng), beta = Random({3}, rng);
  Tensor rm = Tensor::Zeros({3}, DType::kF32), rv = Tensor::Zeros({3}, DType::kF32);
  Tensor grm = OnGpu(rm), grv = OnGpu(rv);
  Tensor mean = Tensor::Empty({3}, DType::kF32), inv = Tensor::Empty({3}, DType::kF32);
  Tensor gmean = Tensor::Empty({3}, DType::kF32, Device::Cuda(0)), ginv = Tensor::Empty({3}, DType::kF32, Device::Cuda(0));
  Tensor b = Tensor::Empty(x.shape(), DType::kF32), gb = Tensor::Empty(x.shape(), DType::kF32, Device::Cuda(0));
  BatchNormForwardTraining(cpu_, BatchNormParams(), x, gamma, beta, b, mean, inv, rm, rv);
  BatchNormForwardTraining(gpu, BatchNormParams(), gx, OnGpu(gamma), OnGpu(beta), gb, gmean, ginv, grm, grv);
  EXPECT_TRUE(Near(gb, b, kFp32)) << "batch norm";
  EXPECT_TRUE(Near(grm, rm, kFp32)) << "running mean";
  Tensor logits = Random({3, 5}, rng);
  logits.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  Tensor labels = Tensor::FromVector<int64_t>({0, 1, 2}, {3});
  Tensor probs = Tensor::Empty({3, 5}, DType::kF32, Device::Cuda(0));
  EXPECT_TRUE(std::isnan(SoftmaxCrossEntropyForward(gpu, CrossEntropyParams(), OnGpu(logits), OnGpu(labels),
                                                    probs).loss));
}


// ------------------------------------------------------------ transformer

// BERT's ops at bert-base's widths and at odd sizes: the embedding
// gradient and dropout bit for bit (the same additions in the same order;
// the same Philox draws), the rest within float rounding of the CPU's.
// Heads of 16: attention made of the other ops on the GPU (its masks the
// fused CPU op's draws).
TEST_F(CudaOpsTest, AttentionMatchesCpu) {
  ExecutionContext gpu = Gpu();
  std::mt19937_64 rng(23);
  const int64_t samples = 3, heads = 4, t = 33, d = 16;
  const Shape shape = {samples * heads, t, d};
  const Tensor q = Random(shape, rng), k = Random(shape, rng), v = Random(shape, rng);
  std::vector<int64_t> mask(samples * t, 1);
  mask[t - 1] = mask[2 * t - 2] = 0;  // padded keys in two samples
  const Tensor key_mask = Tensor::FromVector<int64_t>(mask, {samples, t}), gmask = OnGpu(key_mask);
  for (const float p : {0.0f, 0.1f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    const DropoutKey key{5, 9, 2};
    Tensor context = Tensor::Empty(shape, DType::kF32), gcontext = Tensor::Empty(shape, DType::kF32, Device::Cuda(0));
    AttentionSaved saved, gsaved;
    AttentionForward(cpu_, q, k, v, samples, &key_mask, p, key, 6, context, &saved);
    AttentionForward(gpu, OnGpu(q), OnGpu(k), OnGpu(v), samples, &gmask, p, key, 6, gcontext, &gsaved);
    EXPECT_TRUE(Near(gcontext, context, 1e-5)) << "forward";
    if (p > 0.0f) {
      // The CPU's fused op draws its mask as it goes: the same draws.
      Tensor want = Tensor::Empty(gsaved.keep.shape(), DType::kU8);
      const int64_t per_sample = want.numel() / samples;
      std::vector<float> scales(static_cast<size_t>(per_sample));
      for (int64_t s = 0; s < samples; ++s) {
        DropoutScales(key, p, 6 + s, 0, per_sample, scales.data());
        for (int64_t e = 0; e < per_sample; ++e) want.data<uint8_t>()[s * per_sample + e] = scales[e] != 0.0f;
      }
      EXPECT_TRUE(SameBits(gsaved.keep, want)) << "the same dropout mask";
    }
    const Tensor dcontext = Random(shape, rng);
    Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
           dv = Tensor::Empty(shape, DType::kF32);
    Tensor gdq = GpuNan(shape), gdk = GpuNan(shape), gdv = GpuNan(shape);
    AttentionBackward(cpu_, q, k, v, saved, dcontext, dq, dk, dv);
    AttentionBackward(gpu, OnGpu(q), OnGpu(k), OnGpu(v), gsaved, OnGpu(dcontext), gdq, gdk, gdv);
    EXPECT_TRUE(Near(gdq, dq, 1e-4)) << "dq";
    EXPECT_TRUE(Near(gdk, dk, 1e-4)) << "dk";
    EXPECT_TRUE(Near(gdv, dv, 1e-4)) << "dv";
  }
}

// The fused kernels (heads of 64) against the CPU's fused op in f32: one
// tile and several (130: a last tile of two keys), bert-base's 12 heads at
// 384, a sample all padding and one partly, with and without dropout (the
// same Philox draws, or the outputs would differ by the dropped terms).
// Twice on the GPU, bit for bit: the backward kernels use no atomics.
TEST_F(CudaOpsTest, FusedAttentionMatchesCpu) {
  ExecutionContext gpu = Gpu();
  std::mt19937_64 rng(29);
  struct Case {
    int64_t samples, heads, t;
  };
  for (const Case& c : {Case{3, 2, 33}, Case{2, 2, 130}, Case{2, 12, 384}}) {
    const Shape shape = {c.samples * c.heads, c.t, 64};
    const Tensor q = Random(shape, rng, -2.0, 2.0), k = Random(shape, rng), v = Random(shape, rng);
    const Tensor dcontext = Random(shape, rng);
    std::vector<int64_t> mask(c.samples * c.t, 1);
    for (int64_t j = 0; j < c.t; ++j) mask[j] = 0;                                  // all padding
    for (int64_t j = c.t / 3; j < c.t; ++j) mask[c.t + j] = 0;                      // partly
    const Tensor key_mask = Tensor::FromVector<int64_t>(mask, {c.samples, c.t}), gmask = OnGpu(key_mask);
    for (const float p : {0.0f, 0.1f}) {
      SCOPED_TRACE("t " + std::to_string(c.t) + ", dropout " + std::to_string(p));
      const DropoutKey key{7, 3, 4};
      Tensor context = Tensor::Empty(shape, DType::kF32);
      AttentionSaved saved;
      AttentionForward(cpu_, q, k, v, c.samples, &key_mask, p, key, 10, context, &saved);
      Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
             dv = Tensor::Empty(shape, DType::kF32);
      AttentionBackward(cpu_, q, k, v, saved, dcontext, dq, dk, dv);
      Tensor first[4];
      for (int run = 0; run < 2; ++run) {
        Tensor gcontext = GpuNan(shape);
        AttentionSaved gsaved;
        AttentionForward(gpu, OnGpu(q), OnGpu(k), OnGpu(v), c.samples, &gmask, p, key, 10, gcontext, &gsaved);
        EXPECT_FALSE(gsaved.probs.defined()) << "fused: no probabilities kept";
        Tensor gdq = GpuNan(shape), gdk = GpuNan(shape), gdv = GpuNan(shape);
        AttentionBackward(gpu, OnGpu(q), OnGpu(k), OnGpu(v), gsaved, OnGpu(dcontext), gdq, gdk, gdv);
        const Tensor got[4] = {gcontext, gdq, gdk, gdv};
        if (run == 1) {
          for (int i = 0; i < 4; ++i) EXPECT_TRUE(SameBits(got[i], first[i])) << "output " << i << " repeats";
          continue;
        }
        EXPECT_TRUE(Near(gcontext, context, 1e-5)) << "forward";
        // Each row's own scale: a row all padding has the lowest float.
        const std::vector<double> lse = ToDoubles(saved.lse), glse = ToDoubles(OnCpu(gsaved.lse));
        for (size_t r = 0; r < lse.size(); ++r) {
          ASSERT_NEAR(glse[r], lse[r], 1e-5 * std::max(1.0, std::fabs(lse[r]))) << "log-sum-exp of row " << r;
        }
        EXPECT_TRUE(Near(gdq, dq, 1e-4)) << "dq";
        EXPECT_TRUE(Near(gdk, dk, 1e-4)) << "dk";
        EXPECT_TRUE(Near(gdv, dv, 1e-4)) << "dv";
        for (int i = 0; i < 4; ++i) first[i] = OnCpu(got[i]);
      }
    }
  }
}

TEST_F(CudaOpsTest, TransformerOpsMatchCpu) {
  ExecutionContext gpu = Gpu();
  std::mt19937_64 rng(21);
  const Device cuda = Device::Cuda(0);
  auto empty_like = [&](const Tensor& t) { return Tensor::Empty(t.shape(), t.dtype(), cuda); };
  auto cpu_like = [](const Tensor& t) { return Tensor::Empty(t.shape(), t.dtype()); };

  for (const int64_t hidden : {int64_t{768}, int64_t{37}}) {
    SCOPED_TRACE("hidden " + std::to_string(hidden));
    // Embedding, with repeated ids and a padding id.
    const int64_t vocab = 150, rows = 600;  // more ids than the kernel's 64 buckets, each repeated
    std::vector<int64_t> id_values(rows);
    for (int64_t r = 0; r < rows; ++r) id_values[r] = static_cast<int64_t>(rng() % vocab);
    id_values[3] = id_values[7] = id_values[11] = 0;
    const Tensor ids = Tensor::FromVector<int64_t>(id_values, {rows}), gids = OnGpu(ids);
    const Tensor weight = Random({vocab, hidden}, rng);
    Tensor out = Tensor::Empty({rows, hidden}, DType::kF32), gout = Tensor::Empty({rows, hidden}, DType::kF32, cuda);
    EmbeddingForward(cpu_, weight, ids, out);
    EmbeddingForward(gpu, OnGpu(weight), gids, gout);
    EXPECT_TRUE(SameBits(gout, out)) << "embedding forward";
    const Tensor dout = Random({rows, hidden}, rng);
    Tensor dw = cpu_like(weight), gdw = empty_like(weight);
    EmbeddingBackward(cpu_, ids, dout, dw, /*padding_idx=*/0);
    EmbeddingBackward(gpu, gids, OnGpu(dout), gdw, 0);
    EXPECT_TRUE(SameBits(gdw, dw)) << "embedding backward";

    // LayerNorm (BERT's eps), forward and backward.
    const Tensor x = Random({rows, hidden}, rng, -3.0, 3.0), gamma = Random({hidden}, rng), beta = Random({hidden}, rng);
    Tensor y = cpu_like(x), mean = Tensor::Empty({rows}, DType::kF32), rstd = Tensor::Empty({rows}, DType::kF32);
    Tensor gy = empty_like(x), gmean = empty_like(mean), grstd = empty_like(rstd);
    const Tensor gx = OnGpu(x), ggamma = OnGpu(gamma);
    LayerNormForward(cpu_, x, gamma, beta, 1e-12, y, mean, rstd);
    LayerNormForward(gpu, gx, ggamma, OnGpu(beta), 1e-12, gy, gmean, grstd);
    EXPECT_TRUE(Near(gy, y, kElementwise)) << "layer norm";
    EXPECT_TRUE(Near(grstd, rstd, kElementwise)) << "layer norm rstd";
    EXPECT_TRUE(Near(gmean, mean, kElementwise)) << "layer norm mean";
    const Tensor dy = Random({rows, hidden}, rng), gdy = OnGpu(dy);
    Tensor dx = cpu_like(x), dgamma = cpu_like(gamma), dbeta = cpu_like(gamma);
    Tensor gdx = empty_like(x), gdgamma = empty_like(gamma), gdbeta = empty_like(gamma);
    LayerNormBackward(cpu_, x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
    LayerNormBackward(gpu, gx, gdy, ggamma, gmean, grstd, gdx, gdgamma, gdbeta);
    EXPECT_TRUE(Near(gdx, dx, kElementwise)) << "layer norm dx";
    EXPECT_TRUE(Near(gdgamma, dgamma, kElementwise)) << "layer norm dgamma";
    EXPECT_TRUE(Near(gdbeta, dbeta, kElementwise)) << "layer norm dbeta";

    // GELU (erf) and tanh.
    Tensor act = cpu_like(x), gact = empty_like(x), dact = cpu_like(x), gdact = empty_like(x);
    GeluForward(cpu_, x, act);
    GeluForward(gpu, gx, gact);
    EXPECT_TRUE(Near(gact, act, kElementwise)) << "gelu";
    GeluBackward(cpu_, x, dy, dact);
    GeluBackward(gpu, gx, gdy, gdact);
    EXPECT_TRUE(Near(gdact, dact, kElementwise)) << "gelu backward";
    TanhForward(cpu_, x, act);
    TanhForward(gpu, gx, gact);
    EXPECT_TRUE(Near(gact, act, kElementwise)) << "tanh";
    TanhBackward(cpu_, act, dy, dact);
    TanhBackward(gpu, gact, gdy, gdact);
    EXPECT_TRUE(Near(gdact, dact, kElementwise)) << "tanh backward";

    // Dropout: the same masks, samples placed in the global batch.
    const DropoutKey key{1234, 77, 5};
    Tensor drop = cpu_like(x), gdrop = empty_like(x);
    Tensor keep = Tensor::Empty({rows * hidden}, DType::kU8), gkeep = Tensor::Empty({rows * hidden}, DType::kU8, cuda);
    DropoutForward(cpu_, x, 0.1f, key, 64, drop, keep);
    DropoutForward(gpu, gx, 0.1f, key, 64, gdrop, gkeep);
    EXPECT_TRUE(SameBits(gkeep, keep)) << "dropout mask";
    EXPECT_TRUE(SameBits(gdrop, drop)) << "dropout output";
    DropoutBackward(cpu_, dy, keep, 0.1f, dact);
    DropoutBackward(gpu, gdy, gkeep, 0.1f, gdact);
    EXPECT_TRUE(SameBits(gdact, dact)) << "dropout backward";
  }

  // Heads, attention's masked softmax and its backward: bert-base's 12
  // heads of 64 at 128 tokens, and an odd shape with a padded sample.
  struct Case {
    int64_t n, heads, t, d;
  };
  // 300 keys: more than a block's 256 threads per row.
  for (const Case& c : {Case{2, 12, 128, 64}, Case{3, 2, 7, 5}, Case{2, 2, 300, 8}}) {
    SCOPED_TRACE("attention " + std::to_string(c.n) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.t));
    const Tensor rows = Random({c.n * c.t, c.heads * c.d}, rng);
    Tensor split = Tensor::Empty({c.n * c.heads, c.t, c.d}, DType::kF32), gsplit = empty_like(split);
    SplitHeads(cpu_, rows, c.heads, split);
    SplitHeads(gpu, OnGpu(rows), c.heads, gsplit);
    EXPECT_TRUE(SameBits(gsplit, split)) << "split heads";
    Tensor merged = cpu_like(rows), gmerged = empty_like(rows);
    MergeHeads(cpu_, split, c.heads, merged);
    MergeHeads(gpu, gsplit, c.heads, gmerged);
    EXPECT_TRUE(SameBits(gmerged, merged)) << "merge heads";

    std::vector<int64_t> mask_values(c.n * c.t, 1);
    for (int64_t j = c.t / 2; j < c.t; ++j) mask_values[(c.n - 1) * c.t + j] = 0;  // the last sample padded
    const Tensor mask = Tensor::FromVector<int64_t>(mask_values, {c.n, c.t}), gmask = OnGpu(mask);
    const Tensor scores = Random({c.n, c.heads, c.t, c.t}, rng, -4.0, 4.0);
    Tensor probs = cpu_like(scores), gprobs = empty_like(scores);
    MaskedSoftmaxForward(cpu_, scores, &mask, probs);
    MaskedSoftmaxForward(gpu, OnGpu(scores), &gmask, gprobs);
    EXPECT_TRUE(Near(gprobs, probs, kElementwise)) << "masked softmax";
    const Tensor dprobs = Random(scores.shape(), rng);
    Tensor dscores = cpu_like(scores), gdscores = empty_like(scores);
    SoftmaxBackward(cpu_, probs, dprobs, dscores);
    SoftmaxBackward(gpu, gprobs, OnGpu(dprobs), gdscores);
    EXPECT_TRUE(Near(gdscores, dscores, kElementwise)) << "softmax backward";
  }
}

}  // namespace
}  // namespace ddp
