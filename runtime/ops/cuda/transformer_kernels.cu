#include <cmath>
#include <cstdio>

#include "runtime/ops/cuda/float16.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"
#include "runtime/ops/cuda/transformer_cuda.h"
#include "runtime/philox.h"

namespace ddp::cuda {
namespace {

// Rows of the LayerNorm parameter gradients each block of the first pass
// sums (then the partial sums are added in row-block order).
constexpr int64_t kRowsPerPartial = ExecutionContext::kLayerNormRowsPerPartial;
// Id buckets of the embedding gradient: a thread owns a column of the ids
// with id % kIdBuckets == its bucket, and walks every row in order.
constexpr int64_t kIdBuckets = 64;

// The table and output (or the output gradient and the table's) are of
// storage type S: f32 embeddings, or 16-bit rows of hidden states.
template <typename S>
__global__ void EmbeddingForwardKernel(const S* weight, const int64_t* ids, int64_t rows, int64_t vocab,
                                       int64_t hidden, S* out) {
  DDP_GRID_STRIDE(i, rows * hidden) {
    const int64_t r = i / hidden, c = i % hidden;
    const int64_t id = ids[r];
    if (id < 0 || id >= vocab) {
      // The data loader refuses such batches first; this is a bug upstream.
      if (c == 0) {
        printf("ddp_train: embedding id %lld at position %lld is outside [0, %lld)\n", static_cast<long long>(id),
               static_cast<long long>(r), static_cast<long long>(vocab));
      }
      __trap();
    }
    out[i] = weight[id * hidden + c];
  }
}

// dweight[ids[r], c] += dout[r, c] for r in order, the column c and the ids
// of one bucket per thread: the CPU's additions in the CPU's order (in f32,
// each sum rounded to S).
template <typename S>
__global__ void EmbeddingBackwardKernel(const int64_t* ids, const S* dout, int64_t rows, int64_t vocab,
                                        int64_t hidden, int64_t padding_idx, S* dweight) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t bucket = blockIdx.y;
  if (c >= hidden) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t id = ids[r];
    if (id < 0 || id >= vocab) {
      if (c == 0 && bucket == 0) {
        printf("ddp_train: embedding gradient id %lld at position %lld is outside [0, %lld)\n",
               static_cast<long long>(id), static_cast<long long>(r), static_cast<long long>(vocab));
      }
      __trap();
    }
    if (id == padding_idx || id % kIdBuckets != bucket) continue;
    S& dst = dweight[id * hidden + c];
    dst = FromFloat<S>(ToFloat(dst) + ToFloat(dout[r * hidden + c]));
  }
}

// One block per row: the CPU's two passes in double. The activations are
// of storage type S (f32, or 16-bit for mixed precision); the rest f32.
template <typename S>
__global__ void LayerNormForwardKernel(const S* x, const float* gamma, const float* beta, double eps,
                                       int64_t hidden, S* y, float* mean, float* rstd) {
  __shared__ double shared[kThreads];
  const int64_t row = blockIdx.x;
  const S* xr = x + row * hidden;
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) sum += ToFloat(xr[c]);
  const double mu = BlockSum(sum, shared) / static_cast<double>(hidden);
  double squares = 0.0;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    const double d = ToFloat(xr[c]) - mu;
    squares += d * d;
  }
  const double inv = 1.0 / sqrt(BlockSum(squares, shared) / static_cast<double>(hidden) + eps);
  if (threadIdx.x == 0) {
    mean[row] = static_cast<float>(mu);
    rstd[row] = static_cast<float>(inv);
  }
  S* yr = y + row * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    yr[c] = FromFloat<S>(static_cast<float>((ToFloat(xr[c]) - mu) * inv * gamma[c] + beta[c]));
  }
}

// One block per row: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <typename S>
__global__ void LayerNormBackwardDataKernel(const S* x, const S* dy, const float* gamma, const float* mean,
                                            const float* rstd, int64_t hidden, S* dx) {
  __shared__ double shared[kThreads];
  const int64_t row = blockIdx.x;
  const S* xr = x + row * hidden;
  const S* dyr = dy + row * hidden;
  const double m = mean[row], s = rstd[row];
  double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    const double xhat = (ToFloat(xr[c]) - m) * s;
    const double dxhat = static_cast<double>(ToFloat(dyr[c])) * gamma[c];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
  }
  const double mean_dxhat = BlockSum(sum_dxhat, shared) / static_cast<double>(hidden);
  const double mean_dxhat_xhat = BlockSum(sum_dxhat_xhat, shared) / static_cast<double>(hidden);
  S* dxr = dx + row * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    const double xhat = (ToFloat(xr[c]) - m) * s;
    const double dxhat = static_cast<double>(ToFloat(dyr[c])) * gamma[c];
    dxr[c] = FromFloat<S>(static_cast<float>(s * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)));
  }
}

// Partial column sums over kRowsPerPartial rows each (partial p covers
// rows [p * kRowsPerPartial, ...)), in row order; block y strides over the
// partials.
template <typename S>
__global__ void LayerNormParamPartialKernel(const S* x, const S* dy, const float* mean, const float* rstd,
                                            int64_t rows, int64_t hidden, int64_t partials, double* partial_g,
                                            double* partial_b) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= hidden) return;
  for (int64_t p = blockIdx.y; p < partials; p += gridDim.y) {
    const int64_t r0 = p * kRowsPerPartial;
    const int64_t r1 = r0 + kRowsPerPartial < rows ? r0 + kRowsPerPartial : rows;
    double sum_g = 0.0, sum_b = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
      const double d = ToFloat(dy[r * hidden + c]);
      sum_g += d * ((ToFloat(x[r * hidden + c]) - static_cast<double>(mean[r])) * rstd[r]);
      sum_b += d;
    }
    partial_g[p * hidden + c] = sum_g;
    partial_b[p * hidden + c] = sum_b;
  }
}

__global__ void LayerNormParamTotalKernel(const double* partial_g, const double* partial_b, int64_t partials,
                                          int64_t hidden, float* dgamma, float* dbeta) {
  DDP_GRID_STRIDE(c, hidden) {
    double g = 0.0, b = 0.0;
    for (int64_t p = 0; p < partials; ++p) {
      g += partial_g[p * hidden + c];
      b += partial_b[p * hidden + c];
    }
    dgamma[c] = static_cast<float>(g);
    dbeta[c] = static_cast<float>(b);
  }
}

__device__ inline float NormalCdf(float v) { return 0.5f * (1.0f + erff(v * 0.70710678118654752f)); }

// GELU and tanh over storage type S, computed in f32.
template <typename S>
__global__ void GeluForwardKernel(const S* x, S* y, int64_t n) {
  DDP_GRID_STRIDE(i, n) {
    const float v = ToFloat(x[i]);
    y[i] = FromFloat<S>(v * NormalCdf(v));
  }
}

template <typename S>
__global__ void GeluBackwardKernel(const S* x, const S* dy, S* dx, int64_t n) {
  const float inv_sqrt_2pi = 0.39894228040143268f;
  DDP_GRID_STRIDE(i, n) {
    const float v = ToFloat(x[i]);
    dx[i] = FromFloat<S>(ToFloat(dy[i]) * (NormalCdf(v) + v * inv_sqrt_2pi * expf(-0.5f * v * v)));
  }
}

template <typename S>
__global__ void TanhForwardKernel(const S* x, S* y, int64_t n) {
  DDP_GRID_STRIDE(i, n) { y[i] = FromFloat<S>(tanhf(ToFloat(x[i]))); }
}

template <typename S>
__global__ void TanhBackwardKernel(const S* y, const S* dy, S* dx, int64_t n) {
  DDP_GRID_STRIDE(i, n) {
    const float out = ToFloat(y[i]);
    dx[i] = FromFloat<S>(ToFloat(dy[i]) * (1.0f - out * out));
  }
}

// Element i of the head layout [N * heads, T, d] and its place in the rows
// layout [N * T, heads * d].
template <typename S>
__global__ void PermuteHeadsKernel(const S* src, S* dst, int64_t samples, int64_t heads, int64_t t, int64_t d,
                                   bool to_heads) {
  const int64_t total = samples * heads * t * d;
  DDP_GRID_STRIDE(i, total) {
    const int64_t k = i % d, q = (i / d) % t, h = (i / (d * t)) % heads, n = i / (d * t * heads);
    const int64_t row_at = (n * t + q) * (heads * d) + h * d + k;
    if (to_heads) {
      dst[i] = src[row_at];
    } else {
      dst[row_at] = src[i];
    }
  }
}

// One thread per group of four elements of a sample: one Philox draw.
// Activations of storage type S, scaled in f32.
template <typename S>
__global__ void DropoutForwardKernel(const S* x, float p, uint32_t key0, uint32_t key1, uint64_t step,
                                     int64_t first_sample, int64_t samples, int64_t per_sample, S* y,
                                     uint8_t* keep) {
  const int64_t groups = (per_sample + 3) / 4;
  const float scale = 1.0f / (1.0f - p);
  DDP_GRID_STRIDE(i, samples * groups) {
    const int64_t s = i / groups, g = i % groups;
    const Philox4x32 bits =
        p > 0.0f ? Philox4x32_10(Philox4x32{{static_cast<uint32_t>(g), static_cast<uint32_t>(first_sample + s),
                                             static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}},
                                 key0, key1)
                 : Philox4x32{{0, 0, 0, 0}};
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      if (g * 4 + lane >= per_sample) break;
      const int64_t e = s * per_sample + g * 4 + lane;
      const bool kept = p == 0.0f || UniformFromBits(bits.v[lane]) >= p;
      if (keep != nullptr) keep[e] = kept ? 1 : 0;
      y[e] = FromFloat<S>(kept ? ToFloat(x[e]) * scale : 0.0f);
    }
  }
}

template <typename S>
__global__ void DropoutBackwardKernel(const S* dy, const uint8_t* keep, float scale, S* dx, int64_t n) {
  DDP_GRID_STRIDE(i, n) { dx[i] = FromFloat<S>(keep[i] ? ToFloat(dy[i]) * scale : 0.0f); }
}

// One block per row of Tk scores: the additive mask, the maximum, exp, a
// double sum, and the scaling, as the CPU op; in f32 whatever the storage
// type S, the probabilities rounded to S once.
template <typename S>
__global__ void MaskedSoftmaxForwardKernel(const S* scores, const int64_t* mask, int64_t per_sample_rows, int64_t tk,
                                           S* probs) {
  __shared__ float shared_f[kThreads];
  __shared__ double shared_d[kThreads];
  const int64_t row = blockIdx.x;
  const S* sr = scores + row * tk;
  S* pr = probs + row * tk;
  const int64_t* mr = mask != nullptr ? mask + (row / per_sample_rows) * tk : nullptr;
  const float lowest = -3.402823466e+38f;
  auto masked = [&](int64_t j) { return mr != nullptr && mr[j] == 0 ? ToFloat(sr[j]) + lowest : ToFloat(sr[j]); };
  float local_max = lowest;
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) local_max = fmaxf(local_max, masked(j));
  const float max = BlockMax(local_max, shared_f);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) sum += expf(masked(j) - max);
  const float inv = static_cast<float>(1.0 / BlockSum(sum, shared_d));
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) pr[j] = FromFloat<S>(expf(masked(j) - max) * inv);
}

template <typename S>
__global__ void SoftmaxBackwardKernel(const S* p, const S* dp, int64_t cols, S* ds) {
  __shared__ double shared[kThreads];
  const int64_t row = blockIdx.x;
  double dot = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    dot += static_cast<double>(ToFloat(p[row * cols + j])) * ToFloat(dp[row * cols + j]);
  }
  const float d = static_cast<float>(BlockSum(dot, shared));
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    ds[row * cols + j] = FromFloat<S>(ToFloat(p[row * cols + j]) * (ToFloat(dp[row * cols + j]) - d));
  }
}

// One block per row, for `rows` rows: grid.x past 2^31 - 1 is not needed
// (BERT's rows are N * heads * T), but checked.
unsigned RowBlocks(int64_t rows, const char* op) {
  CHECK_LT(rows, int64_t{1} << 31) << op << ": " << rows << " rows";
  return static_cast<unsigned>(rows);
}

}  // namespace

void EmbeddingForward(ExecutionContext& ctx, const Tensor& weight, const Tensor& ids, Tensor& out) {
  const int64_t rows = ids.numel(), vocab = weight.dim(0), hidden = weight.dim(1);
  if (rows * hidden == 0) return;
  DispatchFloat(weight.dtype(), "cuda::EmbeddingForward", [&](auto tag) {
    using S = decltype(tag);
    EmbeddingForwardKernel<S><<<BlocksFor(rows * hidden), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(weight), ids.data<int64_t>(), rows, vocab, hidden, Storage<S>(out));
  });
  DDP_CHECK_LAUNCH("EmbeddingForwardKernel");
}

void EmbeddingBackward(ExecutionContext& ctx, const Tensor& ids, const Tensor& dout, Tensor& dweight,
                       int64_t padding_idx) {
  const int64_t rows = ids.numel(), vocab = dweight.dim(0), hidden = dweight.dim(1);
  DDP_CUDA_CHECK(cudaMemsetAsync(dweight.raw_data(), 0, dweight.nbytes(), StreamOf(ctx)));
  if (rows * hidden == 0) return;
  const dim3 grid(static_cast<unsigned>((hidden + kThreads - 1) / kThreads), static_cast<unsigned>(kIdBuckets));
  DispatchFloat(dout.dtype(), "cuda::EmbeddingBackward", [&](auto tag) {
    using S = decltype(tag);
    EmbeddingBackwardKernel<S><<<grid, kThreads, 0, StreamOf(ctx)>>>(ids.data<int64_t>(), Storage<S>(dout), rows,
                                                                      vocab, hidden, padding_idx, Storage<S>(dweight));
  });
  DDP_CHECK_LAUNCH("EmbeddingBackwardKernel");
}

void LayerNormForward(ExecutionContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                      Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t hidden = gamma.numel(), rows = mean.numel();
  if (rows == 0) return;
  DispatchFloat(x.dtype(), "cuda::LayerNormForward", [&](auto tag) {
    using S = decltype(tag);
    LayerNormForwardKernel<S><<<RowBlocks(rows, "LayerNormForward"), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(x), gamma.data<float>(), beta.data<float>(), eps, hidden, Storage<S>(y), mean.data<float>(),
        rstd.data<float>());
  });
  DDP_CHECK_LAUNCH("LayerNormForwardKernel");
}

void LayerNormBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t hidden = gamma.numel(), rows = mean.numel();
  if (rows == 0) {
    DDP_CUDA_CHECK(cudaMemsetAsync(dgamma.raw_data(), 0, dgamma.nbytes(), StreamOf(ctx)));
    DDP_CUDA_CHECK(cudaMemsetAsync(dbeta.raw_data(), 0, dbeta.nbytes(), StreamOf(ctx)));
    return;
  }
  DispatchFloat(x.dtype(), "cuda::LayerNormBackward", [&](auto tag) {
    using S = decltype(tag);
    LayerNormBackwardDataKernel<S><<<RowBlocks(rows, "LayerNormBackward"), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(x), Storage<S>(dy), gamma.data<float>(), mean.data<float>(), rstd.data<float>(), hidden,
        Storage<S>(dx));
  });
  DDP_CHECK_LAUNCH("LayerNormBackwardDataKernel");
  const int64_t partials = (rows + kRowsPerPartial - 1) / kRowsPerPartial;
  Tensor partial_g = Tensor::Empty({partials, hidden}, DType::kF64, x.device());
  Tensor partial_b = Tensor::Empty({partials, hidden}, DType::kF64, x.device());
  const dim3 grid(static_cast<unsigned>((hidden + kThreads - 1) / kThreads),
                  static_cast<unsigned>(partials < 65535 ? partials : 65535));
  DispatchFloat(x.dtype(), "cuda::LayerNormBackward", [&](auto tag) {
    using S = decltype(tag);
    LayerNormParamPartialKernel<S><<<grid, kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(x), Storage<S>(dy), mean.data<float>(), rstd.data<float>(), rows, hidden, partials,
        partial_g.data<double>(), partial_b.data<double>());
  });
  DDP_CHECK_LAUNCH("LayerNormParamPartialKernel");
  LayerNormParamTotalKernel<<<BlocksFor(hidden), kThreads, 0, StreamOf(ctx)>>>(
      partial_g.data<double>(), partial_b.data<double>(), partials, hidden, dgamma.data<float>(), dbeta.data<float>());
  DDP_CHECK_LAUNCH("LayerNormParamTotalKernel");
}

void GeluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DispatchFloat(x.dtype(), "cuda::GeluForward", [&](auto tag) {
    using S = decltype(tag);
    GeluForwardKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(x), Storage<S>(y), n);
  });
  DDP_CHECK_LAUNCH("GeluForwardKernel");
}

void GeluBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DispatchFloat(x.dtype(), "cuda::GeluBackward", [&](auto tag) {
    using S = decltype(tag);
    GeluBackwardKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(x), Storage<S>(dy),
                                                                      Storage<S>(dx), n);
  });
  DDP_CHECK_LAUNCH("GeluBackwardKernel");
}

void TanhForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DispatchFloat(x.dtype(), "cuda::TanhForward", [&](auto tag) {
    using S = decltype(tag);
    TanhForwardKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(x), Storage<S>(y), n);
  });
  DDP_CHECK_LAUNCH("TanhForwardKernel");
}

void TanhBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const int64_t n = y.numel();
  if (n == 0) return;
  DispatchFloat(y.dtype(), "cuda::TanhBackward", [&](auto tag) {
    using S = decltype(tag);
    TanhBackwardKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(y), Storage<S>(dy),
                                                                      Storage<S>(dx), n);
  });
  DDP_CHECK_LAUNCH("TanhBackwardKernel");
}

void PermuteHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out, bool to_heads) {
  const Tensor& split = to_heads ? out : x;
  const int64_t samples = split.dim(0) / heads, t = split.dim(1), d = split.dim(2);
  const int64_t n = x.numel();
  if (n == 0) return;
  DispatchFloat(x.dtype(), "cuda::PermuteHeads", [&](auto tag) {
    using S = decltype(tag);
    PermuteHeadsKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(x), Storage<S>(out), samples,
                                                                      heads, t, d, to_heads);
  });
  DDP_CHECK_LAUNCH("PermuteHeadsKernel");
}

void DropoutForward(ExecutionContext& ctx, const Tensor& x, float p, uint32_t key0, uint32_t key1, int64_t step,
                    int64_t first_sample, Tensor& y, uint8_t* keep) {
  const int64_t samples = x.dim(0);
  const int64_t per_sample = samples == 0 ? 0 : x.numel() / samples;
  const int64_t work = samples * ((per_sample + 3) / 4);
  if (work == 0) return;
  DispatchFloat(x.dtype(), "cuda::DropoutForward", [&](auto tag) {
    using S = decltype(tag);
    DropoutForwardKernel<S><<<BlocksFor(work), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(x), p, key0, key1, static_cast<uint64_t>(step), first_sample, samples, per_sample, Storage<S>(y),
        keep);
  });
  DDP_CHECK_LAUNCH("DropoutForwardKernel");
}

void DropoutBackward(ExecutionContext& ctx, const Tensor& dy, const Tensor& keep, float p, Tensor& dx) {
  const int64_t n = dy.numel();
  if (n == 0) return;
  DispatchFloat(dy.dtype(), "cuda::DropoutBackward", [&](auto tag) {
    using S = decltype(tag);
    DropoutBackwardKernel<S><<<BlocksFor(n), kThreads, 0, StreamOf(ctx)>>>(Storage<S>(dy), keep.data<uint8_t>(),
                                                                         1.0f / (1.0f - p), Storage<S>(dx), n);
  });
  DDP_CHECK_LAUNCH("DropoutBackwardKernel");
}

void MaskedSoftmaxForward(ExecutionContext& ctx, const Tensor& scores, const Tensor* key_mask, Tensor& probs) {
  const int64_t n = scores.dim(0), heads = scores.dim(1), tq = scores.dim(2), tk = scores.dim(3);
  const int64_t rows = n * heads * tq;
  if (rows == 0 || tk == 0) return;
  DispatchFloat(scores.dtype(), "cuda::MaskedSoftmaxForward", [&](auto tag) {
    using S = decltype(tag);
    MaskedSoftmaxForwardKernel<S><<<RowBlocks(rows, "MaskedSoftmaxForward"), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(scores), key_mask != nullptr ? key_mask->data<int64_t>() : nullptr, heads * tq, tk,
        Storage<S>(probs));
  });
  DDP_CHECK_LAUNCH("MaskedSoftmaxForwardKernel");
}

void SoftmaxBackward(ExecutionContext& ctx, const Tensor& probs, const Tensor& dprobs, Tensor& dscores) {
  const int64_t cols = probs.ndim() == 0 ? 0 : probs.dim(probs.ndim() - 1);
  const int64_t rows = cols == 0 ? 0 : probs.numel() / cols;
  if (rows == 0) return;
  DispatchFloat(probs.dtype(), "cuda::SoftmaxBackward", [&](auto tag) {
    using S = decltype(tag);
    SoftmaxBackwardKernel<S><<<RowBlocks(rows, "SoftmaxBackward"), kThreads, 0, StreamOf(ctx)>>>(
        Storage<S>(probs), Storage<S>(dprobs), cols, Storage<S>(dscores));
  });
  DDP_CHECK_LAUNCH("SoftmaxBackwardKernel");
}

}  // namespace ddp::cuda
