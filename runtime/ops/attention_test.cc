// BERT's attention op against a float64 reference: the forward with a key
// mask, and dq, dk, dv against finite differences, without dropout and with
// it (its masks are a function of the key and the samples, so the
// reference draws the same ones).
#include "runtime/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/testing/op_testing.h"

namespace ddp {
namespace {

constexpr int64_t kSamples = 2, kHeads = 2, kT = 3, kD = 4;
constexpr int64_t kRows = kSamples * kHeads;

// context = dropout(softmax(q k^T / sqrt(d) + mask)) v in float64; the
// dropout's keep decisions come from DropoutUniform, as the op's do.
Vec RefAttention(const Vec& q, const Vec& k, const Vec& v, const std::vector<int64_t>& mask, float p,
                 const DropoutKey& key) {
  Vec context(q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t sample = r / kHeads;
    for (int64_t i = 0; i < kT; ++i) {
      std::vector<double> score(kT);
      double top = -1e300;
      for (int64_t j = 0; j < kT; ++j) {
        double dot = 0.0;
        for (int64_t e = 0; e < kD; ++e) dot += q[(r * kT + i) * kD + e] * k[(r * kT + j) * kD + e];
        score[j] = mask[sample * kT + j] != 0 ? dot * scale : dot * scale + std::numeric_limits<float>::lowest();
        top = std::max(top, score[j]);
      }
      double sum = 0.0;
      for (double& s : score) sum += (s = std::exp(s - top));
      for (int64_t j = 0; j < kT; ++j) {
        double prob = score[j] / sum;
        if (p > 0.0f) {
          // Element (head, i, j) of this sample's probabilities.
          const int64_t element = ((r % kHeads) * kT + i) * kT + j;
          prob = DropoutUniform(key, sample, element) >= p ? prob / (1.0 - p) : 0.0;
        }
        for (int64_t e = 0; e < kD; ++e) context[(r * kT + i) * kD + e] += prob * v[(r * kT + j) * kD + e];
      }
    }
  }
  return context;
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
  // Padding gets no probability.
  for (int64_t h = 0; h < kHeads; ++h) {
    for (int64_t i = 0; i < kT; ++i) EXPECT_EQ(saved.probs.data<float>()[(h * kT + i) * kT + 2], 0.0f);
  }
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

TEST(AttentionTest, NoDropoutSavesTheProbabilitiesAlone) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const Shape shape = {kRows, kT, kD};
  std::mt19937_64 rng(5);
  const Tensor x = ToF32Tensor(RandomValues(kRows * kT * kD, rng), shape);
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(ctx, x, x, x, kSamples, nullptr, 0.0f, DropoutKey(), 0, context, &saved);
  EXPECT_EQ(saved.probs.shape(), (Shape{kRows, kT, kT}));
  EXPECT_FALSE(saved.keep.defined());
}

// Under dropout the forward keeps the probabilities and the mask, and the
// step holds nothing else of it: what stays allocated after the forward is
// the context, the probabilities (f32) and the 1-byte mask, exactly.
TEST(AttentionTest, DropoutKeepsTheMaskNotTheDroppedCopy) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const Shape shape = {kRows, kT, kD};
  std::mt19937_64 rng(9);
  const Tensor x = ToF32Tensor(RandomValues(kRows * kT * kD, rng), shape);
  Allocator* memory = GetAllocator(Device::Cpu());
  const int64_t before = memory->bytes_in_use();
  Tensor context = Tensor::Empty(shape, DType::kF32);
  AttentionSaved saved;
  AttentionForward(ctx, x, x, x, kSamples, nullptr, 0.3f, DropoutKey{7, 3, 5}, 0, context, &saved);
  const int64_t scores = kRows * kT * kT;
  EXPECT_EQ(memory->bytes_in_use() - before, kRows * kT * kD * 4 + scores * 4 + scores * 1);
}

}  // namespace
}  // namespace ddp
