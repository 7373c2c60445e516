// BERT's attention op against a float64 reference: the forward with a key
// mask, and dq, dk, dv against finite differences, without dropout and with
// it (its masks are a function of the key and the samples, so the
// reference draws the same ones). On a CPU the op is fused: past one block
// of query rows (70 > 64, with a sample whose every key is padding) its
// gradients match a float64 backward, bf16 operands follow f32, and it
// holds no seq x seq matrix: only the context and a log-sum-exp a row.
#include "runtime/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/ops/elementwise.h"
#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

constexpr int64_t kSamples = 2, kHeads = 2, kT = 3, kD = 4;
constexpr int64_t kRows = kSamples * kHeads;

struct Dims {
  int64_t samples, heads, t, d;
  int64_t first_sample = 0;  // the first sample's global index (the dropout draws')
  int64_t rows() const { return samples * heads; }
};
constexpr Dims kSmall{kSamples, kHeads, kT, kD};

// Row i of pair r's probabilities after dropout (P * Z) in float64, and Z:
// a key that is padding adds the lowest float (so a row whose every key is
// padding attends uniformly); the keep decisions come from DropoutUniform,
// as the op's do (element (head, i, j) of the sample).
void RefRow(const Dims& dm, const Vec& q, const Vec& k, const std::vector<int64_t>& mask, float p,
            const DropoutKey& key, int64_t r, int64_t i, std::vector<double>* probs, std::vector<double>* scales) {
  const int64_t t = dm.t, d = dm.d, sample = r / dm.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> score(t);
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < t; ++j) {
    double dot = 0.0;
    for (int64_t e = 0; e < d; ++e) dot += q[(r * t + i) * d + e] * k[(r * t + j) * d + e];
    // As f32 adds it: |score| far below the lowest float's spacing.
    score[j] = mask.empty() || mask[sample * t + j] != 0 ? dot * scale : std::numeric_limits<float>::lowest();
    top = std::max(top, score[j]);
  }
  double sum = 0.0;
  for (double& s : score) sum += (s = std::exp(s - top));
  probs->assign(t, 0.0);
  scales->assign(t, 1.0);
  for (int64_t j = 0; j < t; ++j) {
    (*probs)[j] = score[j] / sum;
    if (p > 0.0f) {
      const int64_t element = ((r % dm.heads) * t + i) * t + j;
      (*scales)[j] = DropoutUniform(key, dm.first_sample + sample, element) >= p ? 1.0 / (1.0 - p) : 0.0;
    }
  }
}

// context = dropout(softmax(q k^T / sqrt(d) + mask)) v in float64.
Vec RefAttention(const Dims& dm, const Vec& q, const Vec& k, const Vec& v, const std::vector<int64_t>& mask, float p,
                 const DropoutKey& key) {
  Vec context(q.size(), 0.0);
  std::vector<double> probs, scales;
  for (int64_t r = 0; r < dm.rows(); ++r) {
    for (int64_t i = 0; i < dm.t; ++i) {
      RefRow(dm, q, k, mask, p, key, r, i, &probs, &scales);
      for (int64_t j = 0; j < dm.t; ++j) {
        for (int64_t e = 0; e < dm.d; ++e) {
          context[(r * dm.t + i) * dm.d + e] += probs[j] * scales[j] * v[(r * dm.t + j) * dm.d + e];
        }
      }
    }
  }
  return context;
}

Vec RefAttention(const Vec& q, const Vec& k, const Vec& v, const std::vector<int64_t>& mask, float p,
                 const DropoutKey& key) {
  return RefAttention(kSmall, q, k, v, mask, p, key);
}

// dq, dk, dv of <dcontext, context> in float64, analytically.
std::vector<Vec> RefAttentionBackward(const Dims& dm, const Vec& q, const Vec& k, const Vec& v,
                                      const std::vector<int64_t>& mask, float p, const DropoutKey& key,
                                      const Vec& dcontext) {
  const int64_t t = dm.t, d = dm.d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<Vec> grads(3, Vec(q.size(), 0.0));
  std::vector<double> probs, scales, dprobs(t);
  for (int64_t r = 0; r < dm.rows(); ++r) {
    for (int64_t i = 0; i < t; ++i) {
      RefRow(dm, q, k, mask, p, key, r, i, &probs, &scales);
      double row_sum = 0.0;
      for (int64_t j = 0; j < t; ++j) {
        double dot = 0.0;
        for (int64_t e = 0; e < d; ++e) dot += dcontext[(r * t + i) * d + e] * v[(r * t + j) * d + e];
        dprobs[j] = dot * scales[j];
        row_sum += probs[j] * dprobs[j];
        for (int64_t e = 0; e < d; ++e) {
          grads[2][(r * t + j) * d + e] += probs[j] * scales[j] * dcontext[(r * t + i) * d + e];
        }
      }
      for (int64_t j = 0; j < t; ++j) {
        const double dscore = probs[j] * (dprobs[j] - row_sum) * scale;
        for (int64_t e = 0; e < d; ++e) {
          grads[0][(r * t + i) * d + e] += dscore * k[(r * t + j) * d + e];
          grads[1][(r * t + j) * d + e] += dscore * q[(r * t + i) * d + e];
        }
      }
    }
  }
  return grads;
}

class AttentionTest : public ::testing::TestWithParam<float> {};

TEST_P(AttentionTest, MatchesFloat64AndFiniteDifferences) {
  const float p = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const DropoutKey key{7, 3, 5};
  const std::vector<int64_t> mask = {1, 1, 0, 1, 1, 1};  // sample 0's last key is padding
  std::mt19937_64 rng(1);
  const Vec q = RandomValues(kRows * kT * kD, rng), k = RandomValues(kRows * kT * kD, rng),
            v = RandomValues(kRows * kT * kD, rng);
  const Shape shape = {kRows, kT, kD};
  const Tensor mask_tensor = Tensor::FromVector<int64_t>(mask, {kSamples, kT});
  const Tensor tq = ToF32Tensor(q, shape), tk = ToF32Tensor(k, shape), tv = ToF32Tensor(v, shape);
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(ctx, tq, tk, tv, kSamples, &mask_tensor, p, key, /*first_sample=*/0, context, &saved);
  const auto reference = [&](const std::vector<Vec>& in) { return RefAttention(in[0], in[1], in[2], mask, p, key); };
  EXPECT_TRUE(testing::AllClose(ToDoubles(context), reference({q, k, v}), 1e-5, 1e-6));
  const Vec weights = RandomValues(kRows * kT * kD, rng);
  Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
         dv = Tensor::Empty(shape, DType::kF32);
  AttentionBackward(ctx, tq, tk, tv, saved, ToF32Tensor(weights, shape), dq, dk, dv);
  testing::GradientCheckOptions options;
  options.step = 1e-5;
  EXPECT_TRUE(testing::GradientChecker(options).Check(reference, {q, k, v}, weights,
                                                      {ToDoubles(dq), ToDoubles(dk), ToDoubles(dv)}));
}

INSTANTIATE_TEST_SUITE_P(Dropout, AttentionTest, ::testing::Values(0.0f, 0.3f));

// Past one block of query rows (70 rows: a block of 64 and one of 6, and
// dropout draws straddling rows), with a sample whose every key is padding
// (it attends uniformly) and one with some: the context and dq, dk, dv
// against float64, with and without dropout.
TEST_P(AttentionTest, PastOneBlockMatchesFloat64) {
  const float p = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const Dims dm{3, 2, 70, 8, /*first_sample=*/5};
  const DropoutKey key{11, 2, 4};
  std::vector<int64_t> mask(dm.samples * dm.t, 1);
  for (int64_t j = 0; j < dm.t; ++j) mask[1 * dm.t + j] = 0;          // sample 1: all padding
  for (int64_t j = 50; j < dm.t; ++j) mask[2 * dm.t + j] = 0;         // sample 2: the last 20
  std::mt19937_64 rng(3);
  const int64_t n = dm.rows() * dm.t * dm.d;
  const Vec q = RandomValues(n, rng), k = RandomValues(n, rng), v = RandomValues(n, rng), dc = RandomValues(n, rng);
  const Shape shape = {dm.rows(), dm.t, dm.d};
  const Tensor mask_tensor = Tensor::FromVector<int64_t>(mask, {dm.samples, dm.t});
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(ctx, ToF32Tensor(q, shape), ToF32Tensor(k, shape), ToF32Tensor(v, shape), dm.samples,
                   &mask_tensor, p, key, dm.first_sample, context, &saved);
  EXPECT_TRUE(testing::AllClose(ToDoubles(context), RefAttention(dm, q, k, v, mask, p, key), 1e-5, 1e-6));
  Tensor dq = Tensor::Empty(shape, DType::kF32), dk = Tensor::Empty(shape, DType::kF32),
         dv = Tensor::Empty(shape, DType::kF32);
  AttentionBackward(ctx, ToF32Tensor(q, shape), ToF32Tensor(k, shape), ToF32Tensor(v, shape), saved,
                    ToF32Tensor(dc, shape), dq, dk, dv);
  const std::vector<Vec> want = RefAttentionBackward(dm, q, k, v, mask, p, key, dc);
  EXPECT_TRUE(testing::AllClose(ToDoubles(dq), want[0], 1e-5, 1e-6));
  EXPECT_TRUE(testing::AllClose(ToDoubles(dk), want[1], 1e-5, 1e-6));
  EXPECT_TRUE(testing::AllClose(ToDoubles(dv), want[2], 1e-5, 1e-6));
}

// bf16 operands (widened once, f32 accumulation, rounded once) follow the
// f32 op on the same (bf16-exact) values within bf16's rounding, padding
// and dropout included.
TEST(AttentionTest, Bf16FollowsF32) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const Dims dm{2, 2, 70, 8};
  const Shape shape = {dm.rows(), dm.t, dm.d};
  std::mt19937_64 rng(4);
  const int64_t n = dm.rows() * dm.t * dm.d;
  std::vector<Tensor> f32, bf16;
  for (int i = 0; i < 4; ++i) {
    Tensor wide = ToF32Tensor(RandomValues(n, rng), shape), narrow = Tensor::Empty(shape, DType::kBF16);
    CastScaled(ctx, wide, 1.0f, narrow);
    CastScaled(ctx, narrow, 1.0f, wide);  // bf16-exact
    f32.push_back(wide);
    bf16.push_back(narrow);
  }
  const DropoutKey key{1, 1, 1};
  std::vector<int64_t> keys(dm.samples * dm.t, 1);
  for (int64_t j = 0; j < dm.t; ++j) keys[j] = 0;           // sample 0: all padding
  for (int64_t j = 60; j < dm.t; ++j) keys[dm.t + j] = 0;  // sample 1: the last 10
  const Tensor mask = Tensor::FromVector<int64_t>(keys, {dm.samples, dm.t});
  auto run = [&](const std::vector<Tensor>& in, DType dtype) {
    Tensor context = Tensor::Empty(shape, dtype), dq = Tensor::Empty(shape, dtype), dk = Tensor::Empty(shape, dtype),
           dv = Tensor::Empty(shape, dtype);
    AttentionSaved saved;
    AttentionForward(ctx, in[0], in[1], in[2], dm.samples, &mask, 0.1f, key, 0, context, &saved);
    AttentionBackward(ctx, in[0], in[1], in[2], saved, in[3], dq, dk, dv);
    std::vector<Vec> out;
    for (const Tensor& t : {context, dq, dk, dv}) out.push_back(ToDoubles(t));
    return out;
  };
  const std::vector<Vec> want = run(f32, DType::kF32), got = run(bf16, DType::kBF16);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(testing::AllClose(got[i], want[i], 1e-2, 1e-2)) << "output " << i;
}

// The factors the fused op draws again (eight Philox groups at a time
// where a run allows) are DropoutUniform's draws, element for element:
// runs that start inside a group, span many groups and end inside one.
TEST(AttentionTest, DropoutScalesAreTheDropoutDraws) {
  const DropoutKey key{13, (int64_t{1} << 33) + 5, 2};
  const float p = 0.25f;
  for (const auto& [first, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 384}, {3, 70}, {70 * 69, 70}, {1, 2}, {(int64_t{1} << 34) - 37, 101}}) {
    std::vector<float> scales(static_cast<size_t>(count));
    DropoutScales(key, p, 9, first, count, scales.data());
    int64_t wrong = 0;
    for (int64_t e = 0; e < count; ++e) {
      const float want = DropoutUniform(key, 9, first + e) >= p ? 1.0f / (1.0f - p) : 0.0f;
      wrong += scales[e] != want;
    }
    EXPECT_EQ(wrong, 0) << "from " << first << ", " << count;
  }
}

// Forward keeps the context and one f32 log-sum-exp a row, and nothing of
// size seq x seq; backward allocates no tensor at all beyond its outputs
// (each block's probabilities live in a thread's own scratch).
TEST(AttentionTest, KeepsNoSeqBySeqMatrix) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const Dims dm{2, 2, 70, 8};
  const Shape shape = {dm.rows(), dm.t, dm.d};
  std::mt19937_64 rng(9);
  const Tensor x = ToF32Tensor(RandomValues(dm.rows() * dm.t * dm.d, rng), shape);
  Allocator* memory = GetAllocator(Device::Cpu());
  const int64_t before = memory->bytes_in_use();
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(ctx, x, x, x, dm.samples, nullptr, 0.3f, DropoutKey{7, 3, 5}, 0, context, &saved);
  EXPECT_EQ(memory->bytes_in_use() - before, dm.rows() * dm.t * dm.d * 4 + dm.rows() * dm.t * 4);
  EXPECT_FALSE(saved.probs.defined());
  EXPECT_FALSE(saved.keep.defined());
  Tensor dq = Tensor::EmptyLike(x), dk = Tensor::EmptyLike(x), dv = Tensor::EmptyLike(x);
  const int64_t outputs = memory->bytes_in_use();
  memory->ResetPeak();
  AttentionBackward(ctx, x, x, x, saved, context, dq, dk, dv);
  EXPECT_EQ(memory->peak_bytes_in_use(), outputs);
}

}  // namespace
}  // namespace ddp
