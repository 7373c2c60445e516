// The CUDA fused attention kernels' f32 path, run on the CPU under
// runtime/testing/cuda_emulation.h, against the CPU's fused op (itself
// pinned to a float64 reference by attention_test): forward's output and
// log-sum-exp, and the two backward kernels' dq, dk and dv, with padding (a
// sample all padding, one partly), without dropout and with it (the same
// Philox draws), over sequences of one tile and of several, with blocks of
// rows and of keys that end past the sequence. What the emulation cannot
// reach, the tensor-core (WMMA) tiles of the 16-bit path, the GPU tests
// compare with the CPU (cuda_ops_test, cuda_low_precision_test).
#include "runtime/testing/cuda_emulation.h"

#include "runtime/ops/cuda/attention_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/ops/attention.h"
#include "runtime/testing/tensor_testing.h"

DDP_EMULATED_SHARED_MEMORY(ddp::cuda::attention_kernels, 101376)

namespace ddp {
namespace {

namespace ak = cuda::attention_kernels;
namespace emulation = testing::emulation;

using testing::RandomValues;
using testing::ToDoubles;
using testing::ToF32Tensor;

// max |got - want| over max |want|.
double RelativeError(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = ToDoubles(got), w = ToDoubles(want);
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    scale = std::max(scale, std::fabs(w[i]));
    worst = std::max(worst, std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]));
  }
  return worst / scale;
}

struct Case {
  int64_t samples, heads, t;
  float p;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.samples << " samples, " << c.heads << " heads, " << c.t << " tokens, dropout " << c.p;
}

class AttentionEmulatedTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionEmulatedTest, KernelsMatchTheCpuOp) {
  const Case c = GetParam();
  const int64_t d = cuda::kFusedAttentionHead, pairs = c.samples * c.heads, n = pairs * c.t * d;
  const Shape shape = {pairs, c.t, d};
  std::mt19937_64 rng(static_cast<uint64_t>(c.t) * 7 + static_cast<uint64_t>(c.p * 10));
  const Tensor q = ToF32Tensor(RandomValues(n, rng, -2.0, 2.0), shape), k = ToF32Tensor(RandomValues(n, rng), shape),
               v = ToF32Tensor(RandomValues(n, rng), shape), dcontext = ToF32Tensor(RandomValues(n, rng), shape);
  // The last sample all padding, the one before it padded from a third on.
  std::vector<int64_t> keys(static_cast<size_t>(c.samples * c.t), 1);
  for (int64_t j = 0; j < c.t; ++j) keys[(c.samples - 1) * c.t + j] = 0;
  for (int64_t j = c.t / 3; j < c.t; ++j) keys[(c.samples - 2) * c.t + j] = 0;
  const Tensor mask = Tensor::FromVector<int64_t>(keys, {c.samples, c.t});
  const DropoutKey key{99, 12, 3};
  const int64_t first_sample = 5;

  ExecutionContext cpu = ExecutionContext::Cpu(2);
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(cpu, q, k, v, c.samples, &mask, c.p, key, first_sample, context, &saved);
  Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
         dv = Tensor::Empty(shape, DType::kF32);
  AttentionBackward(cpu, q, k, v, saved, dcontext, dq, dk, dv);

  const DropoutKeyWords words = DropoutPhiloxKey(key);
  const ak::Params<float> a{q.data<float>(), k.data<float>(), v.data<float>(), c.t, c.heads, mask.data<int64_t>(),
                            1.0f / std::sqrt(static_cast<float>(d)), c.p, words.k0, words.k1,
                            static_cast<uint64_t>(key.step), first_sample};
  using Tiles = ak::Tiles<float>;
  const dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>((c.t + Tiles::kRows - 1) / Tiles::kRows));
  Tensor gcontext = Tensor::Empty(shape, DType::kF32), glse = Tensor::Empty({pairs, c.t}, DType::kF32);
  emulation::Launch(grid, Tiles::kThreads, ak::ForwardKernel<float>, a, gcontext.data<float>(), glse.data<float>());
  EXPECT_LT(RelativeError(gcontext, context), 1e-5) << "context";
  const std::vector<double> lse = ToDoubles(saved.lse), got = ToDoubles(glse);
  for (size_t r = 0; r < lse.size(); ++r) {
    ASSERT_NEAR(got[r], lse[r], 1e-5 * std::max(1.0, std::fabs(lse[r]))) << "log-sum-exp of row " << r;
  }

  Tensor row_dot = Tensor::Empty({pairs, c.t}, DType::kF32);
  Tensor gdq = Tensor::Empty(shape, DType::kF32), gdk = Tensor::Empty(shape, DType::kF32),
         gdv = Tensor::Empty(shape, DType::kF32);
  emulation::Launch(grid, Tiles::kThreads, ak::QueryBackwardKernel<float>, a, glse.data<float>(),
                    static_cast<const float*>(dcontext.data<float>()), gdq.data<float>(), row_dot.data<float>());
  emulation::Launch(grid, Tiles::kThreads, ak::KeyBackwardKernel<float>, a, static_cast<const float*>(glse.data<float>()),
                    static_cast<const float*>(row_dot.data<float>()), static_cast<const float*>(dcontext.data<float>()),
                    gdk.data<float>(), gdv.data<float>());
  EXPECT_LT(RelativeError(gdq, dq), 1e-4) << "dq";
  EXPECT_LT(RelativeError(gdk, dk), 1e-4) << "dk";
  EXPECT_LT(RelativeError(gdv, dv), 1e-4) << "dv";
}

// 37: one tile of keys, two blocks of 32 rows; 130: three tiles, the last
// of two keys, and five blocks.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionEmulatedTest,
                         ::testing::Values(Case{2, 2, 37, 0.0f}, Case{2, 2, 37, 0.1f}, Case{3, 1, 130, 0.0f},
                                           Case{3, 1, 130, 0.1f}),
                         [](const auto& info) {
                           return "t" + std::to_string(info.param.t) + (info.param.p > 0.0f ? "_dropout" : "");
                         });

}  // namespace
}  // namespace ddp
