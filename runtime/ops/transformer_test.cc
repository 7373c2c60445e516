// BERT's ops on the CPU: each forward against an independent float64
// reference written here, each backward against float64 central
// differences of that reference (GradientChecker); the embedding's
// repeated ids, LayerNorm at BERT's eps, the padding mask's exact zeros,
// and dropout masks that depend on the global sample index, never on how
// the batch is split.
#include "runtime/ops/transformer.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::RandomValues;
using testing::ToDoubles;
using testing::ToF32Tensor;
using Vec = std::vector<double>;

// ---------------------------------------------------------- references

Tensor Filled(const Shape& shape, float value) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  t.Fill(value);
  return t;
}

Vec RefEmbedding(const Vec& weight, int64_t hidden, const std::vector<int64_t>& ids) {
  Vec out;
  for (int64_t id : ids) out.insert(out.end(), weight.begin() + id * hidden, weight.begin() + (id + 1) * hidden);
  return out;
}

Vec RefLayerNorm(const Vec& x, const Vec& gamma, const Vec& beta, int64_t hidden, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / hidden; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < hidden; ++c) mean += x[r * hidden + c];
    mean /= hidden;
    for (int64_t c = 0; c < hidden; ++c) var += (x[r * hidden + c] - mean) * (x[r * hidden + c] - mean);
    var /= hidden;
    for (int64_t c = 0; c < hidden; ++c) {
      y[r * hidden + c] = (x[r * hidden + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
    }
  }
  return y;
}

Vec RefGelu(const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
  return y;
}

// Softmax over rows of length tk, adding the lowest f32 where the key is
// padding (the row's sample is row / rows_per_sample).
Vec RefMaskedSoftmax(const Vec& scores, int64_t tk, int64_t rows_per_sample, const std::vector<int64_t>& mask) {
  Vec p(scores.size());
  const double lowest = std::numeric_limits<float>::lowest();
  for (size_t r = 0; r < scores.size() / tk; ++r) {
    Vec v(tk);
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < tk; ++j) {
      const bool padded = !mask.empty() && mask[(r / rows_per_sample) * tk + j] == 0;
      v[j] = scores[r * tk + j] + (padded ? lowest : 0.0);
      max = std::max(max, v[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < tk; ++j) sum += std::exp(v[j] - max);
    for (int64_t j = 0; j < tk; ++j) p[r * tk + j] = std::exp(v[j] - max) / sum;
  }
  return p;
}

// ------------------------------------------------------------- embedding

TEST(EmbeddingTest, GathersRowsAndAccumulatesRepeatedIds) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(3);
  const int64_t vocab = 11, hidden = 5;
  const std::vector<int64_t> ids = {3, 0, 3, 10, 7, 3, 0, 1};  // 3 three times, 0 twice
  const Vec weight = RandomValues(vocab * hidden, rng);
  Tensor out = Tensor::Empty({static_cast<int64_t>(ids.size()), hidden}, DType::kF32);
  EmbeddingForward(ctx, ToF32Tensor(weight, {vocab, hidden}), Tensor::FromVector<int64_t>(ids, {2, 4}), out);
  EXPECT_EQ(ToDoubles(out), RefEmbedding(weight, hidden, ids));

  const Vec dy = RandomValues(static_cast<int64_t>(ids.size()) * hidden, rng);
  Tensor dweight = Filled({vocab, hidden}, 7.0f);  // overwritten, not added to
  EmbeddingBackward(ctx, Tensor::FromVector<int64_t>(ids, {2, 4}), ToF32Tensor(dy, {8, hidden}), dweight);
  auto reference = [&](const std::vector<Vec>& in) { return RefEmbedding(in[0], hidden, ids); };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {weight}, dy, {ToDoubles(dweight)}));
  // Rows no id names get zero.
  for (int64_t c = 0; c < hidden; ++c) EXPECT_EQ(dweight.data<float>()[2 * hidden + c], 0.0f);
  // A padding id's row gets none, whatever names it.
  Tensor padded = Tensor::Empty({vocab, hidden}, DType::kF32);
  EmbeddingBackward(ctx, Tensor::FromVector<int64_t>(ids, {8}), ToF32Tensor(dy, {8, hidden}), padded,
                    /*padding_idx=*/3);
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t c = 0; c < hidden; ++c) {
      EXPECT_EQ(padded.data<float>()[v * hidden + c], v == 3 ? 0.0f : dweight.data<float>()[v * hidden + c]);
    }
  }
}

TEST(GatherRowsTest, GathersAnyRowsAndScattersTheirGradientsBack) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  // A table of 5 rows of 3: row r holds r, r + 0.25, r + 0.5.
  std::vector<float> values;
  for (int r = 0; r < 5; ++r) values.insert(values.end(), {r + 0.0f, r + 0.25f, r + 0.5f});
  const Tensor table = Tensor::FromVector<float>(values, {5, 3});
  const Tensor rows = Tensor::FromVector<int64_t>({4, 0, 4, 2}, {4});
  Tensor out = Tensor::Empty({4, 3}, DType::kF32);
  GatherRows(ctx, table, rows, out);
  const std::vector<float> want = {4, 4.25f, 4.5f, 0, 0.25f, 0.5f, 4, 4.25f, 4.5f, 2, 2.25f, 2.5f};
  EXPECT_EQ(std::vector<float>(out.data<float>(), out.data<float>() + 12), want);
  // Back: row 4 gets both of its gradients, rows 1 and 3 none.
  const Tensor dout = Tensor::FromVector<float>({1, 2, 3, 10, 20, 30, 100, 200, 300, -1, -2, -3}, {4, 3});
  Tensor dtable = Tensor::Empty({5, 3}, DType::kF32);
  dtable.Fill(7.0);  // overwritten, not added to
  ScatterAddRows(ctx, rows, dout, dtable);
  const std::vector<float> dwant = {10, 20, 30, 0, 0, 0, -1, -2, -3, 0, 0, 0, 101, 202, 303};
  EXPECT_EQ(std::vector<float>(dtable.data<float>(), dtable.data<float>() + 15), dwant);
}

TEST(EmbeddingTest, BackwardIsTheSameForAnyThreadCount) {
  std::mt19937_64 rng(4);
  const int64_t vocab = 50, hidden = 300, rows = 400;
  std::vector<int64_t> ids(rows);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % 7);  // many repeats
  const Tensor dy = ToF32Tensor(RandomValues(rows * hidden, rng), {rows, hidden});
  const Tensor id_tensor = Tensor::FromVector<int64_t>(ids, {rows});
  Tensor one = Tensor::Empty({vocab, hidden}, DType::kF32), two = Tensor::Empty({vocab, hidden}, DType::kF32);
  ExecutionContext single = ExecutionContext::Cpu(1);
  EmbeddingBackward(single, id_tensor, dy, one);
  ExecutionContext pair = ExecutionContext::Cpu(2);
  EmbeddingBackward(pair, id_tensor, dy, two);
  EXPECT_EQ(ToDoubles(one), ToDoubles(two));
}

// ------------------------------------------------------------ layer norm

class LayerNormTest : public ::testing::TestWithParam<double> {};

TEST_P(LayerNormTest, MatchesFloat64ForwardAndGradients) {
  const double eps = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(5);
  const int64_t rows = 6, hidden = 16;
  Vec x = RandomValues(rows * hidden, rng, -2.0, 2.0);
  for (int64_t c = 0; c < hidden; ++c) x[c] += 3.0;  // an offset row
  const Vec gamma = RandomValues(hidden, rng, 0.5, 1.5), beta = RandomValues(hidden, rng);
  Tensor y = Tensor::Empty({2, 3, hidden}, DType::kF32);
  Tensor mean = Tensor::Empty({rows}, DType::kF32), rstd = Tensor::Empty({rows}, DType::kF32);
  const Tensor xt = ToF32Tensor(x, {2, 3, hidden});
  LayerNormForward(ctx, xt, ToF32Tensor(gamma, {hidden}), ToF32Tensor(beta, {hidden}), eps, y, mean, rstd);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), RefLayerNorm(x, gamma, beta, hidden, eps), 1e-5, 1e-6));

  const Vec dy = RandomValues(rows * hidden, rng);
  Tensor dx = Tensor::Empty({2, 3, hidden}, DType::kF32);
  Tensor dgamma = Tensor::Empty({hidden}, DType::kF32), dbeta = Tensor::Empty({hidden}, DType::kF32);
  LayerNormBackward(ctx, xt, ToF32Tensor(dy, {2, 3, hidden}), ToF32Tensor(gamma, {hidden}), mean, rstd, dx, dgamma,
                    dbeta);
  auto reference = [&](const std::vector<Vec>& in) { return RefLayerNorm(in[0], in[1], in[2], hidden, eps); };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x, gamma, beta}, dy,
                                               {ToDoubles(dx), ToDoubles(dgamma), ToDoubles(dbeta)}));
}

// BERT's 1e-12 and torch.nn.LayerNorm's default 1e-5.
INSTANTIATE_TEST_SUITE_P(Eps, LayerNormTest, ::testing::Values(1e-12, 1e-5));

TEST(LayerNormTest, ConstantRowIsBetaAtBertsEps) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const int64_t hidden = 8;
  Tensor x = Filled({1, hidden}, 0.25f);
  Tensor y = Tensor::Empty({1, hidden}, DType::kF32);
  Tensor mean = Tensor::Empty({1}, DType::kF32), rstd = Tensor::Empty({1}, DType::kF32);
  Tensor beta = Filled({hidden}, -0.5f);
  LayerNormForward(ctx, x, Filled({hidden}, 2.0f), beta, 1e-12, y, mean, rstd);
  for (int64_t c = 0; c < hidden; ++c) EXPECT_EQ(y.data<float>()[c], -0.5f);
  EXPECT_EQ(mean.data<float>()[0], 0.25f);
}

// ------------------------------------------------------------------ GELU

TEST(GeluTest, IsTheErfFormForwardAndBackward) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(6);
  Vec x = RandomValues(200, rng, -6.0, 6.0);
  x[0] = 0.0;
  const Tensor xt = ToF32Tensor(x, {10, 20});
  Tensor y = Tensor::Empty({10, 20}, DType::kF32);
  GeluForward(ctx, xt, y);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), RefGelu(x), 1e-6, 1e-7));
  // The tanh approximation differs from the erf form by up to ~5e-4 near
  // |x| = 2: the check above tells them apart.
  const double t = 2.0;
  const double tanh_form = 0.5 * t * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * t * t * t)));
  EXPECT_GT(std::fabs(tanh_form - RefGelu({t})[0]), 1e-5);

  const Vec dy = RandomValues(200, rng);
  Tensor dx = Tensor::Empty({10, 20}, DType::kF32);
  GeluBackward(ctx, xt, ToF32Tensor(dy, {10, 20}), dx);
  auto reference = [](const std::vector<Vec>& in) { return RefGelu(in[0]); };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}));
}

// ------------------------------------------------------- tanh and heads

TEST(TanhTest, ForwardAndBackwardFromTheOutput) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::mt19937_64 rng(11);
  const Vec x = RandomValues(40, rng, -3.0, 3.0);
  Tensor y = Tensor::Empty({4, 10}, DType::kF32);
  TanhForward(ctx, ToF32Tensor(x, {4, 10}), y);
  Vec ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = std::tanh(x[i]);
  EXPECT_TRUE(testing::AllClose(ToDoubles(y), ref, 1e-6, 1e-7));
  const Vec dy = RandomValues(40, rng);
  Tensor dx = Tensor::Empty({4, 10}, DType::kF32);
  TanhBackward(ctx, y, ToF32Tensor(dy, {4, 10}), dx);
  auto reference = [](const std::vector<Vec>& in) {
    Vec out(in[0].size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::tanh(in[0][i]);
    return out;
  };
  EXPECT_TRUE(testing::GradientChecker().Check(reference, {x}, dy, {ToDoubles(dx)}));
}

TEST(HeadsTest, SplitPlacesEachHeadAndMergeInvertsIt) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const int64_t n = 2, t = 3, heads = 4, d = 5;
  Vec x(n * t * heads * d);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  Tensor split = Tensor::Empty({n * heads, t, d}, DType::kF32);
  SplitHeads(ctx, ToF32Tensor(x, {n * t, heads * d}), heads, split);
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t e = 0; e < d; ++e) {
          ASSERT_EQ(split.data<float>()[((s * heads + h) * t + i) * d + e], x[(s * t + i) * heads * d + h * d + e]);
        }
      }
    }
  }
  Tensor merged = Tensor::Empty({n * t, heads * d}, DType::kF32);
  MergeHeads(ctx, split, heads, merged);
  EXPECT_EQ(ToDoubles(merged), x);
}

// --------------------------------------------------------------- dropout

TEST(DropoutTest, DropsAboutPAndScalesTheRest) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const int64_t n = 8, per_sample = 12345;  // not a multiple of 4
  std::mt19937_64 rng(7);
  const Vec x = RandomValues(n * per_sample, rng, 0.5, 1.5);  // never 0
  const Tensor xt = ToF32Tensor(x, {n, per_sample});
  const float p = 0.1f;
  DropoutKey key{/*seed=*/42, /*step=*/3, /*site=*/5};
  Tensor y = Tensor::Empty({n, per_sample}, DType::kF32), keep = Tensor::Empty({n, per_sample}, DType::kU8);
  DropoutForward(ctx, xt, p, key, /*first_sample=*/16, y, keep);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n * per_sample; ++i) {
    const bool kept = keep.data<uint8_t>()[i] != 0;
    dropped += !kept;
    EXPECT_EQ(y.data<float>()[i], kept ? static_cast<float>(x[i]) * (1.0f / 0.9f) : 0.0f) << i;
    // Each decision is the documented draw of (global sample, element).
    if (i % 997 == 0) {
      EXPECT_EQ(kept, DropoutUniform(key, 16 + i / per_sample, i % per_sample) >= p) << i;
    }
  }
  // 98760 Bernoulli(0.1) draws: mean 9876, standard deviation 94.
  EXPECT_NEAR(static_cast<double>(dropped), 0.1 * n * per_sample, 6 * 94.0);

  const Vec dy = RandomValues(n * per_sample, rng);
  Tensor dx = Tensor::Empty({n, per_sample}, DType::kF32);
  DropoutBackward(ctx, ToF32Tensor(dy, {n, per_sample}), keep, p, dx);
  for (int64_t i = 0; i < n * per_sample; ++i) {
    EXPECT_EQ(dx.data<float>()[i], keep.data<uint8_t>()[i] ? static_cast<float>(dy[i]) * (1.0f / 0.9f) : 0.0f);
  }
}

TEST(DropoutTest, MaskDependsOnGlobalSampleNotOnTheSplit) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const int64_t n = 4, t = 3, h = 10;
  std::mt19937_64 rng(8);
  const Vec x = RandomValues(n * t * h, rng);
  const DropoutKey key{1, 0, 2};
  Tensor whole = Tensor::Empty({n, t, h}, DType::kF32), whole_keep = Tensor::Empty({n, t, h}, DType::kU8);
  DropoutForward(ctx, ToF32Tensor(x, {n, t, h}), 0.5f, key, 0, whole, whole_keep);
  // Two micro-batches (or two ranks) of 2 samples: samples 0-1 and 2-3.
  for (int64_t half = 0; half < 2; ++half) {
    const Vec part(x.begin() + half * 2 * t * h, x.begin() + (half + 1) * 2 * t * h);
    Tensor y = Tensor::Empty({2, t, h}, DType::kF32), keep = Tensor::Empty({2, t, h}, DType::kU8);
    DropoutForward(ctx, ToF32Tensor(part, {2, t, h}), 0.5f, key, half * 2, y, keep);
    for (int64_t i = 0; i < 2 * t * h; ++i) {
      EXPECT_EQ(keep.data<uint8_t>()[i], whole_keep.data<uint8_t>()[half * 2 * t * h + i]);
      EXPECT_EQ(y.data<float>()[i], whole.data<float>()[half * 2 * t * h + i]);
    }
  }
  // Another step, site or seed draws another mask.
  for (const DropoutKey other : {DropoutKey{1, 1, 2}, DropoutKey{1, 0, 3}, DropoutKey{2, 0, 2}}) {
    Tensor y = Tensor::Empty({n, t, h}, DType::kF32), keep = Tensor::Empty({n, t, h}, DType::kU8);
    DropoutForward(ctx, ToF32Tensor(x, {n, t, h}), 0.5f, other, 0, y, keep);
    int64_t differ = 0;
    for (int64_t i = 0; i < n * t * h; ++i) differ += keep.data<uint8_t>()[i] != whole_keep.data<uint8_t>()[i];
    EXPECT_GT(differ, n * t * h / 4) << "seed " << other.seed << " step " << other.step << " site " << other.site;
  }
}

TEST(DropoutTest, ZeroProbabilityIsTheIdentity) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::mt19937_64 rng(9);
  const Vec x = RandomValues(60, rng);
  Tensor y = Tensor::Empty({3, 20}, DType::kF32), keep = Tensor::Empty({3, 20}, DType::kU8);
  DropoutForward(ctx, ToF32Tensor(x, {3, 20}), 0.0f, DropoutKey{}, 0, y, keep);
  EXPECT_EQ(ToDoubles(y), x);
}

// ------------------------------------------------------ masked softmax

TEST(MaskedSoftmaxTest, MatchesFloat64WithPaddingAndGradients) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::mt19937_64 rng(10);
  const int64_t n = 3, heads = 2, tq = 4, tk = 5;
  const Vec scores = RandomValues(n * heads * tq * tk, rng, -3.0, 3.0);
  // Sample 0 attends to everything, sample 1 to its first 3 keys, sample 2
  // to none (a query whose keys are all padding attends uniformly).
  const std::vector<int64_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  const Tensor st = ToF32Tensor(scores, {n, heads, tq, tk});
  const Tensor mt = Tensor::FromVector<int64_t>(mask, {n, tk});
  Tensor probs = Tensor::Empty({n, heads, tq, tk}, DType::kF32);
  MaskedSoftmaxForward(ctx, st, &mt, probs);
  const Vec ref = RefMaskedSoftmax(scores, tk, heads * tq, mask);
  EXPECT_TRUE(testing::AllClose(ToDoubles(probs), ref, 1e-6, 1e-7));
  for (int64_t r = 0; r < heads * tq; ++r) {
    const float* row1 = probs.data<float>() + (heads * tq + r) * tk;
    EXPECT_EQ(row1[3], 0.0f);
    EXPECT_EQ(row1[4], 0.0f);
    const float* row2 = probs.data<float>() + (2 * heads * tq + r) * tk;
    for (int64_t j = 0; j < tk; ++j) EXPECT_FLOAT_EQ(row2[j], 0.2f);
  }

  // Gradients: without the mask (the masked columns' zero probabilities
  // have zero gradient, which the unmasked check covers too).
  Tensor plain = Tensor::Empty({n, heads, tq, tk}, DType::kF32);
  MaskedSoftmaxForward(ctx, st, nullptr, plain);
  EXPECT_TRUE(testing::AllClose(ToDoubles(plain), RefMaskedSoftmax(scores, tk, heads * tq, {}), 1e-6, 1e-7));
  const Vec dp = RandomValues(n * heads * tq * tk, rng);
  for (const bool masked : {false, true}) {
    SCOPED_TRACE(masked ? "masked" : "plain");
    Tensor ds = Tensor::Empty({n, heads, tq, tk}, DType::kF32);
    SoftmaxBackward(ctx, masked ? probs : plain, ToF32Tensor(dp, {n, heads, tq, tk}), ds);
    auto reference = [&](const std::vector<Vec>& in) {
      return RefMaskedSoftmax(in[0], tk, heads * tq, masked ? mask : std::vector<int64_t>());
    };
    // Sample 2's uniform rows come from the f32 mask offset, which swamps a
    // finite difference: its gradient is checked against zero-sum instead.
    Vec analytic = ToDoubles(ds);
    if (masked) {
      const int64_t keep = 2 * heads * tq * tk;
      const Vec s01(scores.begin(), scores.begin() + keep);
      const Vec dp01(dp.begin(), dp.begin() + keep);
      const Vec a01(analytic.begin(), analytic.begin() + keep);
      auto reference01 = [&](const std::vector<Vec>& in) {
        return RefMaskedSoftmax(in[0], tk, heads * tq, std::vector<int64_t>(mask.begin(), mask.begin() + 2 * tk));
      };
      EXPECT_TRUE(testing::GradientChecker().Check(reference01, {s01}, dp01, {a01}));
      for (int64_t r = 2 * heads * tq; r < n * heads * tq; ++r) {
        double sum = 0.0;
        for (int64_t j = 0; j < tk; ++j) sum += analytic[r * tk + j];
        EXPECT_NEAR(sum, 0.0, 1e-6);
      }
    } else {
      EXPECT_TRUE(testing::GradientChecker().Check(reference, {scores}, dp, {analytic}));
    }
  }
}

}  // namespace
}  // namespace ddp
