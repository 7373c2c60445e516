#include "runtime/ops/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/ops/cpu/float_types.h"
#include "runtime/ops/cuda/transformer_cuda.h"
#include "runtime/ops/op_checks.h"
#include "runtime/philox.h"

namespace ddp {
namespace {

constexpr int64_t kParallelThreshold = 1 << 14;

// The rows of a tensor whose last dimension is `cols`.
int64_t RowsOf(const Tensor& t, int64_t cols) { return cols == 0 ? 0 : t.numel() / cols; }

void CheckSameShapeAs(const Tensor& a, const Tensor& b, const char* op) {
  CHECK(a.shape() == b.shape()) << op << ": " << a.DebugString() << " and " << b.DebugString() << " differ in shape";
}

// An op's activations (layer norm's x, y, dy, dx; an embedding table and
// its rows; softmax's, GELU's, ...) share one dtype: f32, or 16-bit for
// mixed precision; the others (gamma, beta, statistics, parameter
// gradients) are f32.
void CheckActivationsAndF32(const ExecutionContext& ctx, const char* op,
                            std::initializer_list<const Tensor*> activations,
                            std::initializer_list<const Tensor*> f32) {
  const Tensor& first = **activations.begin();
  for (const Tensor* t : activations) {
    CheckActivation(ctx, *t, op);
    CHECK(t->dtype() == first.dtype()) << op << ": " << t->DebugString() << " and " << first.DebugString()
                                       << " differ in dtype";
  }
  for (const Tensor* t : f32) CheckF32(*t, op);
}

// Every id within [0, vocab): a bug upstream otherwise (the data loader
// refuses such batches first, naming the tensor).
void CheckIds(const int64_t* id, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    CHECK(id[r] >= 0 && id[r] < vocab) << "embedding id " << id[r] << " at position " << r << " is outside [0, "
                                       << vocab << ")";
  }
}

}  // namespace

void EmbeddingForward(ExecutionContext& ctx, const Tensor& weight, const Tensor& ids, Tensor& out) {
  CheckOnDevice(ctx, "EmbeddingForward", {&weight, &ids, &out});
  CheckActivationsAndF32(ctx, "EmbeddingForward", {&weight, &out}, {});
  CHECK(ids.dtype() == DType::kI64) << "embedding ids must be i64, got " << ids.DebugString();
  CHECK(weight.ndim() == 2 && out.ndim() == 2 && out.dim(0) == ids.numel() && out.dim(1) == weight.dim(1))
      << "embedding shapes: weight " << weight.DebugString() << ", ids " << ids.DebugString() << ", output "
      << out.DebugString();
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("EmbeddingForward", cuda::EmbeddingForward(ctx, weight, ids, out));
  const int64_t rows = ids.numel(), vocab = weight.dim(0), hidden = weight.dim(1);
  const int64_t* id = ids.data<int64_t>();
  CheckIds(id, rows, vocab);
  // Row copies, whatever the element type.
  const size_t row_bytes = static_cast<size_t>(hidden) * DTypeSize(weight.dtype());
  const char* w = static_cast<const char*>(weight.raw_data());
  char* y = static_cast<char*>(out.raw_data());
#pragma omp parallel for schedule(static) if (rows * hidden > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * row_bytes, w + id[r] * row_bytes, row_bytes);
}

void EmbeddingBackward(ExecutionContext& ctx, const Tensor& ids, const Tensor& dout, Tensor& dweight,
                       int64_t padding_idx) {
  CheckOnDevice(ctx, "EmbeddingBackward", {&ids, &dout, &dweight});
  CheckActivationsAndF32(ctx, "EmbeddingBackward", {&dout, &dweight}, {});
  CHECK(ids.dtype() == DType::kI64 && dweight.ndim() == 2 && dout.ndim() == 2 && dout.dim(0) == ids.numel() &&
        dout.dim(1) == dweight.dim(1))
      << "embedding backward shapes: ids " << ids.DebugString() << ", output gradient " << dout.DebugString()
      << ", weight gradient " << dweight.DebugString();
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("EmbeddingBackward", cuda::EmbeddingBackward(ctx, ids, dout, dweight, padding_idx));
  }
  const int64_t rows = ids.numel(), vocab = dweight.dim(0), hidden = dweight.dim(1);
  const int64_t* id = ids.data<int64_t>();
  CheckIds(id, rows, vocab);
  std::memset(dweight.raw_data(), 0, dweight.nbytes());
  cpu::DispatchFloat(dout.dtype(), "EmbeddingBackward", [&](auto tag) {
    using S = decltype(tag);
    const S* dy = cpu::Elements<S>(dout);
    S* dw = cpu::Elements<S>(dweight);
    // Threads split the columns, and each walks every row in order: repeated
    // ids add up in the same order whatever the thread count (in f32, each
    // sum rounded to S).
    const int64_t block = 64;
#pragma omp parallel for schedule(static) if (rows * hidden > kParallelThreshold)
    for (int64_t c0 = 0; c0 < hidden; c0 += block) {
      const int64_t c1 = std::min(hidden, c0 + block);
      for (int64_t r = 0; r < rows; ++r) {
        if (id[r] == padding_idx) continue;
        S* dst = dw + id[r] * hidden;
        const S* src = dy + r * hidden;
        for (int64_t c = c0; c < c1; ++c) dst[c] = cpu::FromFloat<S>(cpu::ToFloat(dst[c]) + cpu::ToFloat(src[c]));
      }
    }
  });
}

namespace {

// The CPU's forward over storage type S: per row, two passes in double (the
// mean, then the centred squares), then y rounded to S.
template <typename S>
void LayerNormForwardCpu(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, int64_t rows,
                         int64_t hidden, Tensor& y, Tensor& mean, Tensor& rstd) {
  const S* in = cpu::Elements<S>(x);
  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  S* out = cpu::Elements<S>(y);
  float* m = mean.data<float>();
  float* s = rstd.data<float>();
#pragma omp parallel for schedule(static) if (rows * hidden > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const S* xr = in + r * hidden;
    double sum = 0.0;
    for (int64_t c = 0; c < hidden; ++c) sum += cpu::ToFloat(xr[c]);
    const double mu = sum / static_cast<double>(hidden);
    double squares = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      const double d = cpu::ToFloat(xr[c]) - mu;
      squares += d * d;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + eps);
    m[r] = static_cast<float>(mu);
    s[r] = static_cast<float>(inv);
    S* yr = out + r * hidden;
    for (int64_t c = 0; c < hidden; ++c) {
      yr[c] = cpu::FromFloat<S>(static_cast<float>((cpu::ToFloat(xr[c]) - mu) * inv * g[c] + b[c]));
    }
  }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat =
// dy * gamma, per row in double; the parameter gradients per column, rows
// in order (the same sums whatever the thread count).
template <typename S>
void LayerNormBackwardCpu(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                          const Tensor& rstd, int64_t rows, int64_t hidden, Tensor& dx, Tensor& dgamma,
                          Tensor& dbeta) {
  const S* in = cpu::Elements<S>(x);
  const S* grad = cpu::Elements<S>(dy);
  const float* g = gamma.data<float>();
  const float* m = mean.data<float>();
  const float* s = rstd.data<float>();
  S* out = cpu::Elements<S>(dx);
#pragma omp parallel for schedule(static) if (rows * hidden > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const S* xr = in + r * hidden;
    const S* dyr = grad + r * hidden;
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      const double xhat = (cpu::ToFloat(xr[c]) - static_cast<double>(m[r])) * s[r];
      const double dxhat = static_cast<double>(cpu::ToFloat(dyr[c])) * g[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    const double mean_dxhat = sum_dxhat / static_cast<double>(hidden);
    const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(hidden);
    S* dxr = out + r * hidden;
    for (int64_t c = 0; c < hidden; ++c) {
      const double xhat = (cpu::ToFloat(xr[c]) - static_cast<double>(m[r])) * s[r];
      const double dxhat = static_cast<double>(cpu::ToFloat(dyr[c])) * g[c];
      dxr[c] = cpu::FromFloat<S>(static_cast<float>(s[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)));
    }
  }
  float* dg = dgamma.data<float>();
  float* db = dbeta.data<float>();
#pragma omp parallel for schedule(static) if (rows * hidden > kParallelThreshold)
  for (int64_t c = 0; c < hidden; ++c) {
    double sum_g = 0.0, sum_b = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d = cpu::ToFloat(grad[r * hidden + c]);
      sum_g += d * ((cpu::ToFloat(in[r * hidden + c]) - static_cast<double>(m[r])) * s[r]);
      sum_b += d;
    }
    dg[c] = static_cast<float>(sum_g);
    db[c] = static_cast<float>(sum_b);
  }
}

}  // namespace

void LayerNormForward(ExecutionContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                      Tensor& y, Tensor& mean, Tensor& rstd) {
  CheckOnDevice(ctx, "LayerNormForward", {&x, &gamma, &beta, &y, &mean, &rstd});
  CheckActivationsAndF32(ctx, "LayerNormForward", {&x, &y}, {&gamma, &beta, &mean, &rstd});
  CheckSameShapeAs(x, y, "LayerNormForward");
  const int64_t hidden = x.ndim() == 0 ? 0 : x.dim(x.ndim() - 1);
  const int64_t rows = RowsOf(x, hidden);
  CHECK(gamma.shape() == Shape{hidden} && beta.shape() == Shape{hidden} && mean.numel() == rows &&
        rstd.numel() == rows)
      << "layer norm shapes: x " << x.DebugString() << ", gamma " << gamma.DebugString() << ", beta "
      << beta.DebugString() << ", mean " << mean.DebugString() << ", rstd " << rstd.DebugString();
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("LayerNormForward", cuda::LayerNormForward(ctx, x, gamma, beta, eps, y, mean, rstd));
  }
  cpu::DispatchFloat(x.dtype(), "LayerNormForward", [&](auto tag) {
    LayerNormForwardCpu<decltype(tag)>(x, gamma, beta, eps, rows, hidden, y, mean, rstd);
  });
}

void LayerNormBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  CheckOnDevice(ctx, "LayerNormBackward", {&x, &dy, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta});
  CheckActivationsAndF32(ctx, "LayerNormBackward", {&x, &dy, &dx}, {&gamma, &mean, &rstd, &dgamma, &dbeta});
  CheckSameShapeAs(x, dy, "LayerNormBackward");
  CheckSameShapeAs(x, dx, "LayerNormBackward");
  const int64_t hidden = x.ndim() == 0 ? 0 : x.dim(x.ndim() - 1);
  const int64_t rows = RowsOf(x, hidden);
  CHECK(gamma.shape() == Shape{hidden} && dgamma.shape() == Shape{hidden} && dbeta.shape() == Shape{hidden} &&
        mean.numel() == rows && rstd.numel() == rows)
      << "layer norm backward shapes: x " << x.DebugString() << ", gamma " << gamma.DebugString();
  if (OnMeta(ctx)) {
    if (ctx.planned_device().is_cuda() && rows > 0) {  // the CUDA kernels' f64 partial sums, while they run
      const int64_t partials = (rows + ExecutionContext::kLayerNormRowsPerPartial - 1) /
                               ExecutionContext::kLayerNormRowsPerPartial;
      const Tensor partial_g = Tensor::Empty({partials, hidden}, DType::kF64, ctx.device());
      const Tensor partial_b = Tensor::Empty({partials, hidden}, DType::kF64, ctx.device());
    }
    return;
  }
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("LayerNormBackward",
                       cuda::LayerNormBackward(ctx, x, dy, gamma, mean, rstd, dx, dgamma, dbeta));
  }
  cpu::DispatchFloat(x.dtype(), "LayerNormBackward", [&](auto tag) {
    LayerNormBackwardCpu<decltype(tag)>(x, dy, gamma, mean, rstd, rows, hidden, dx, dgamma, dbeta);
  });
}

namespace {

// y[i] = f(x[i]), computed in f32 whatever the storage (f32, or 16-bit
// for mixed precision: x and y share it). `on_cuda` runs the op on a CUDA
// context.
template <typename F, typename G>
void Elementwise(ExecutionContext& ctx, const char* op, const Tensor& x, Tensor& y, F f, G on_cuda) {
  CheckOnDevice(ctx, op, {&x, &y});
  CheckActivationsAndF32(ctx, op, {&x, &y}, {});
  CheckSameShapeAs(x, y, op);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return on_cuda();
  const int64_t n = x.numel();
  cpu::DispatchFloat(x.dtype(), op, [&](auto tag) {
    using S = decltype(tag);
    const S* in = cpu::Elements<S>(x);
    S* out = cpu::Elements<S>(y);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = cpu::FromFloat<S>(f(cpu::ToFloat(in[i])));
  });
}

// dx[i] = dy[i] * f(saved[i]): the derivative from what forward kept; the
// three share one storage type.
template <typename F, typename G>
void ElementwiseGrad(ExecutionContext& ctx, const char* op, const Tensor& saved, const Tensor& dy, Tensor& dx, F f,
                     G on_cuda) {
  CheckOnDevice(ctx, op, {&saved, &dy, &dx});
  CheckActivationsAndF32(ctx, op, {&saved, &dy, &dx}, {});
  CheckSameShapeAs(saved, dy, op);
  CheckSameShapeAs(saved, dx, op);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return on_cuda();
  const int64_t n = saved.numel();
  cpu::DispatchFloat(saved.dtype(), op, [&](auto tag) {
    using S = decltype(tag);
    const S* s = cpu::Elements<S>(saved);
    const S* grad = cpu::Elements<S>(dy);
    S* out = cpu::Elements<S>(dx);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = cpu::FromFloat<S>(cpu::ToFloat(grad[i]) * f(cpu::ToFloat(s[i])));
  });
}

float NormalCdf(float v) { return 0.5f * (1.0f + std::erf(v * static_cast<float>(M_SQRT1_2))); }

}  // namespace

void GeluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  Elementwise(ctx, "GeluForward", x, y, [](float v) { return v * NormalCdf(v); },
              [&] { DDP_ON_CUDA("GeluForward", cuda::GeluForward(ctx, x, y)); });
}

void GeluBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  // d/dx x Phi(x) = Phi(x) + x phi(x).
  const float inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
  ElementwiseGrad(
      ctx, "GeluBackward", x, dy, dx, [=](float v) { return NormalCdf(v) + v * inv_sqrt_2pi * std::exp(-0.5f * v * v); },
      [&] { DDP_ON_CUDA("GeluBackward", cuda::GeluBackward(ctx, x, dy, dx)); });
}

void TanhForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  Elementwise(ctx, "TanhForward", x, y, [](float v) { return std::tanh(v); },
              [&] { DDP_ON_CUDA("TanhForward", cuda::TanhForward(ctx, x, y)); });
}

void TanhBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  ElementwiseGrad(ctx, "TanhBackward", y, dy, dx, [](float out) { return 1.0f - out * out; },
                  [&] { DDP_ON_CUDA("TanhBackward", cuda::TanhBackward(ctx, y, dy, dx)); });
}

namespace {

// [N * T, heads * d] <-> [N * heads, T, d]: `to_heads` moves rows of x
// into out's head-major layout, else back.
void PermuteHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out, bool to_heads, const char* op) {
  CheckOnDevice(ctx, op, {&x, &out});
  CheckActivationsAndF32(ctx, op, {&x, &out}, {});
  const Tensor& rows = to_heads ? x : out;
  const Tensor& split = to_heads ? out : x;
  CHECK(rows.ndim() == 2 && split.ndim() == 3 && heads > 0 && rows.dim(1) % heads == 0 &&
        split.dim(2) == rows.dim(1) / heads && split.dim(0) % heads == 0 &&
        split.dim(0) / heads * split.dim(1) == rows.dim(0))
      << op << ": rows " << rows.DebugString() << " and heads " << split.DebugString() << " with " << heads
      << " heads";
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA(op, cuda::PermuteHeads(ctx, x, heads, out, to_heads));
  const int64_t samples = split.dim(0) / heads, t = split.dim(1), d = split.dim(2), width = rows.dim(1);
  // A copy of d elements at a time, whatever their type.
  const size_t size = DTypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() > kParallelThreshold)
  for (int64_t n = 0; n < samples; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < t; ++i) {
        const int64_t row_at = (n * t + i) * width + h * d;
        const int64_t head_at = ((n * heads + h) * t + i) * d;
        if (to_heads) {
          std::memcpy(dst + head_at * size, src + row_at * size, d * size);
        } else {
          std::memcpy(dst + row_at * size, src + head_at * size, d * size);
        }
      }
    }
  }
}

}  // namespace

void SplitHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out) {
  PermuteHeads(ctx, x, heads, out, /*to_heads=*/true, "SplitHeads");
}

void MergeHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out) {
  PermuteHeads(ctx, x, heads, out, /*to_heads=*/false, "MergeHeads");
}

void MaskedSoftmaxForward(ExecutionContext& ctx, const Tensor& scores, const Tensor* key_mask, Tensor& probs) {
  CheckOnDevice(ctx, "MaskedSoftmaxForward", {&scores, &probs});
  CheckActivationsAndF32(ctx, "MaskedSoftmaxForward", {&scores, &probs}, {});
  CheckSameShapeAs(scores, probs, "MaskedSoftmaxForward");
  CHECK(scores.ndim() == 4) << "attention scores must be [N, heads, Tq, Tk], got " << scores.DebugString();
  const int64_t n = scores.dim(0), heads = scores.dim(1), tq = scores.dim(2), tk = scores.dim(3);
  if (key_mask != nullptr) {
    CHECK(key_mask->dtype() == DType::kI64 && key_mask->shape() == (Shape{n, tk}))
        << "attention mask must be i64 [" << n << ", " << tk << "], got " << key_mask->DebugString();
    CheckOnDevice(ctx, "MaskedSoftmaxForward", {key_mask});
  }
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("MaskedSoftmaxForward", cuda::MaskedSoftmaxForward(ctx, scores, key_mask, probs));
  }
  const int64_t rows = n * heads * tq;
  const int64_t* mask = key_mask != nullptr ? key_mask->data<int64_t>() : nullptr;
  const float lowest = std::numeric_limits<float>::lowest();
  cpu::DispatchFloat(scores.dtype(), "MaskedSoftmaxForward", [&](auto tag) {
    using S = decltype(tag);
    const S* in = cpu::Elements<S>(scores);
    S* out = cpu::Elements<S>(probs);
#pragma omp parallel if (rows * tk > kParallelThreshold)
    {
      std::vector<float> row(static_cast<size_t>(tk));  // the row in f32, rounded to S once at the end
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const S* sr = in + r * tk;
        const int64_t* mr = mask != nullptr ? mask + (r / (heads * tq)) * tk : nullptr;
        float max = lowest;
        for (int64_t j = 0; j < tk; ++j) {
          row[j] = mr != nullptr && mr[j] == 0 ? cpu::ToFloat(sr[j]) + lowest : cpu::ToFloat(sr[j]);
          max = std::max(max, row[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < tk; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        S* pr = out + r * tk;
        for (int64_t j = 0; j < tk; ++j) pr[j] = cpu::FromFloat<S>(row[j] * inv);
      }
    }
  });
}

void SoftmaxBackward(ExecutionContext& ctx, const Tensor& probs, const Tensor& dprobs, Tensor& dscores) {
  CheckOnDevice(ctx, "SoftmaxBackward", {&probs, &dprobs, &dscores});
  CheckActivationsAndF32(ctx, "SoftmaxBackward", {&probs, &dprobs, &dscores}, {});
  CheckSameShapeAs(probs, dprobs, "SoftmaxBackward");
  CheckSameShapeAs(probs, dscores, "SoftmaxBackward");
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("SoftmaxBackward", cuda::SoftmaxBackward(ctx, probs, dprobs, dscores));
  const int64_t cols = probs.ndim() == 0 ? 0 : probs.dim(probs.ndim() - 1);
  const int64_t rows = RowsOf(probs, cols);
  cpu::DispatchFloat(probs.dtype(), "SoftmaxBackward", [&](auto tag) {
    using S = decltype(tag);
    const S* p = cpu::Elements<S>(probs);
    const S* dp = cpu::Elements<S>(dprobs);
    S* ds = cpu::Elements<S>(dscores);
#pragma omp parallel for schedule(static) if (rows * cols > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        dot += static_cast<double>(cpu::ToFloat(p[r * cols + j])) * cpu::ToFloat(dp[r * cols + j]);
      }
      const float d = static_cast<float>(dot);
      for (int64_t j = 0; j < cols; ++j) {
        ds[r * cols + j] = cpu::FromFloat<S>(cpu::ToFloat(p[r * cols + j]) * (cpu::ToFloat(dp[r * cols + j]) - d));
      }
    }
  });
}

}  // namespace ddp
