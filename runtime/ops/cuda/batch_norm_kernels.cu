#include <algorithm>
#include <cstdint>

#include "runtime/ops/cuda/batch_norm_cuda.h"
#include "runtime/ops/cuda/float16.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"

namespace ddp::cuda {
namespace {

// x viewed as [N, C, S] with S = H*W (NCHW), or as [rows, C] with S = 1
// (channels-last, N = rows). Element j < m of channel c sits at
// (j / S * C + c) * S + j % S in both. Index arithmetic is 32-bit (the
// host checks numel < 2^31): 64-bit division is slow on the GPU.
struct Layout {
  uint32_t c, s, m;  // channels, inner size, values per channel
  bool channels_last;
};

Layout LayoutOf(const Tensor& x) {
  CHECK_LT(x.numel(), int64_t{1} << 31) << "CUDA batch norm takes fewer than 2^31 elements, got " << x.DebugString();
  const int64_t c = x.dim(1);
  const int64_t s = x.channels_last() ? 1 : x.numel() / (x.dim(0) * c);
  return {static_cast<uint32_t>(c), static_cast<uint32_t>(s), static_cast<uint32_t>(x.numel() / c),
          x.channels_last()};
}

__device__ __forceinline__ uint32_t ChannelOf(const Layout& l, uint32_t i) {
  return l.channels_last ? i % l.c : (i / l.s) % l.c;
}

__device__ __forceinline__ uint32_t IndexOf(const Layout& l, uint32_t c, uint32_t j) {
  const uint32_t n = j / l.s;
  return (n * l.c + c) * l.s + (j - n * l.s);
}

// ReLU that lets NaN through, as ReluForward.
__device__ __forceinline__ float Relu(float v) { return v > 0.0f || v != v ? v : 0.0f; }

// The forward's epilogue on element i: relu?(v + residual?[i]).
template <typename S, bool kResidual, bool kRelu>
struct Finish {
  const S* residual;
  __device__ float operator()(float v, uint32_t i) const {
    if constexpr (kResidual) v += ToFloat(residual[i]);
    if constexpr (kRelu) v = Relu(v);
    return v;
  }
};

// The backward's output gradient on element i, masked by the ReLU (kept
// where the forward's output is positive or NaN, as ReluBackward); with
// kWrite it is stored to d_residual as well (a select: exact).
template <typename S, bool kRelu, bool kWrite>
struct MaskGrad {
  const S* y;
  S* d_residual;
  __device__ float operator()(float d, uint32_t i) const {
    if constexpr (kRelu) {
      const float v = ToFloat(y[i]);
      d = v > 0.0f || v != v ? d : 0.0f;
    }
    if constexpr (kWrite) d_residual[i] = FromFloat<S>(d);
    return d;
  }
  // The same value in a later pass: read back where it was written.
  __device__ float Again(const S* dy, uint32_t i) const {
    if constexpr (kWrite) {
      return ToFloat(d_residual[i]);
    } else {
      return MaskGrad<S, kRelu, false>{y, nullptr}(ToFloat(dy[i]), i);
    }
  }
};

// What the statistics sum for element i of channel c: (x - shift, (x - shift)^2).
template <typename S>
struct ForwardSums {
  const S* x;
  const float* shift;
  __device__ float2 operator()(uint32_t i, uint32_t c) const {
    const float v = ToFloat(x[i]) - shift[c];
    return make_float2(v, v * v);
  }
};

// What the backward sums: (d, d * (x - mean)) with d the masked gradient.
template <typename S, typename M>
struct BackwardSums {
  const S* x;
  const S* dy;
  const float* mean;
  M mask;
  __device__ float2 operator()(uint32_t i, uint32_t c) const {
    const float d = mask(ToFloat(dy[i]), i);
    return make_float2(d, d * (ToFloat(x[i]) - mean[c]));
  }
};

// Stage one of the per-channel sums: block (split, c) sums its chunk of
// channel c into partial[(split * C + c) * 2 + {0, 1}]. NCHW: one channel
// per block, threads along the channel's contiguous planes.
template <typename Sums>
__global__ void ChannelSumsNchw(Layout l, uint32_t chunk, Sums sums, float* partial) {
  __shared__ float shared[kThreads];
  const uint32_t c = blockIdx.y, split = blockIdx.x;
  const uint32_t j0 = split * chunk, j1 = min(l.m, j0 + chunk);
  float a = 0.0f, b = 0.0f;
  for (uint32_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const float2 v = sums(IndexOf(l, c, j), c);
    a += v.x;
    b += v.y;
  }
  a = BlockSum(a, shared);
  b = BlockSum(b, shared);
  if (threadIdx.x == 0) {
    partial[(split * l.c + c) * 2] = a;
    partial[(split * l.c + c) * 2 + 1] = b;
  }
}

// Channels-last: a block is 32 channels (threadIdx.x, coalesced) by 8 rows
// (threadIdx.y); the 8 row sums are added in order.
constexpr int kTileChannels = 32, kTileRows = 8;

template <typename Sums>
__global__ void ChannelSumsNhwc(Layout l, uint32_t chunk, Sums sums, float* partial) {
  __shared__ float sa[kTileRows][kTileChannels + 1], sb[kTileRows][kTileChannels + 1];
  const uint32_t c = blockIdx.y * kTileChannels + threadIdx.x, split = blockIdx.x;
  const uint32_t j0 = split * chunk, j1 = min(l.m, j0 + chunk);
  float a = 0.0f, b = 0.0f;
  if (c < l.c) {
    for (uint32_t j = j0 + threadIdx.y; j < j1; j += kTileRows) {
      const float2 v = sums(j * l.c + c, c);
      a += v.x;
      b += v.y;
    }
  }
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < l.c) {
    float ta = 0.0f, tb = 0.0f;
    for (int r = 0; r < kTileRows; ++r) {
      ta += sa[r][threadIdx.x];
      tb += sb[r][threadIdx.x];
    }
    partial[(split * l.c + c) * 2] = ta;
    partial[(split * l.c + c) * 2 + 1] = tb;
  }
}

// Stage two, per channel: the splits' sums in order, in f64.
__device__ double2 SumSplits(const float* partial, uint32_t splits, uint32_t channels, uint32_t c) {
  double a = 0.0, b = 0.0;
  for (uint32_t s = 0; s < splits; ++s) {
    a += partial[(s * channels + c) * 2];
    b += partial[(s * channels + c) * 2 + 1];
  }
  return make_double2(a, b);
}

template <typename S>
__global__ void FirstValuesKernel(Layout l, const S* x, float* shift) {
  DDP_GRID_STRIDE(c, l.c) { shift[c] = ToFloat(x[IndexOf(l, static_cast<uint32_t>(c), 0)]); }
}

// Batch statistics from the sums of (x - shift): mean, biased variance for
// normalizing, unbiased for the running variance; the scale and shift that
// apply them.
__global__ void FinishStatistics(Layout l, uint32_t splits, const float* partial, const float* first,
                                 const float* gamma, const float* beta, double eps, double momentum,
                                 float* saved_mean, float* saved_invstd, float* running_mean, float* running_var,
                                 float* scale, float* shift) {
  DDP_GRID_STRIDE(c, l.c) {
    const double2 sums = SumSplits(partial, splits, l.c, static_cast<uint32_t>(c));
    const double count = l.m;
    const double shifted_mean = sums.x / count;
    const double var = fmax(sums.y / count - shifted_mean * shifted_mean, 0.0);
    const double mean = first[c] + shifted_mean;
    const double invstd = 1.0 / sqrt(var + eps);
    saved_mean[c] = static_cast<float>(mean);
    saved_invstd[c] = static_cast<float>(invstd);
    running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1.0));
    scale[c] = static_cast<float>(gamma[c] * invstd);
    shift[c] = static_cast<float>(beta[c] - mean * gamma[c] * invstd);
  }
}

__global__ void InferenceCoefficients(uint32_t channels, double eps, const float* gamma, const float* beta,
                                      const float* running_mean, const float* running_var, float* scale,
                                      float* shift) {
  DDP_GRID_STRIDE(c, channels) {
    const double invstd = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
    scale[c] = static_cast<float>(gamma[c] * invstd);
    shift[c] = static_cast<float>(beta[c] - static_cast<double>(running_mean[c]) * gamma[c] * invstd);  // in f64, as the CPU
  }
}

template <typename S, typename F>
__global__ void ApplyForward(Layout l, const S* x, const float* scale, const float* shift, F finish, S* y) {
  DDP_GRID_STRIDE(i64, static_cast<int64_t>(l.c) * l.m) {
    const uint32_t i = static_cast<uint32_t>(i64), c = ChannelOf(l, i);
    y[i] = FromFloat<S>(finish(ToFloat(x[i]) * scale[c] + shift[c], i));
  }
}

// The weight and bias gradients from the sums of (d, d * (x - mean)), and
// the coefficients of dx = k * (d - mean_d - xhat * mean_d_xhat).
__global__ void FinishGradients(Layout l, uint32_t splits, const float* partial, const float* gamma,
                                const float* invstd, float* dgamma, float* dbeta, float* k, float* mean_d,
                                float* mean_d_xhat) {
  DDP_GRID_STRIDE(c, l.c) {
    const double2 sums = SumSplits(partial, splits, l.c, static_cast<uint32_t>(c));
    const double dg = sums.y * invstd[c];
    dbeta[c] = static_cast<float>(sums.x);
    dgamma[c] = static_cast<float>(dg);
    k[c] = gamma[c] * invstd[c];
    mean_d[c] = static_cast<float>(sums.x / l.m);
    mean_d_xhat[c] = static_cast<float>(dg / l.m);
  }
}

template <typename S, typename M>
__global__ void ApplyBackward(Layout l, const S* x, const S* dy, const float* mean, const float* invstd,
                              const float* k, const float* mean_d, const float* mean_d_xhat, M mask, S* dx) {
  DDP_GRID_STRIDE(i64, static_cast<int64_t>(l.c) * l.m) {
    const uint32_t i = static_cast<uint32_t>(i64), c = ChannelOf(l, i);
    const float xhat = (ToFloat(x[i]) - mean[c]) * invstd[c];
    dx[i] = FromFloat<S>(k[c] * (mask.Again(dy, i) - mean_d[c] - xhat * mean_d_xhat[c]));
  }
}

// Stage one's launch shape: `splits` chunks of every channel, so that about
// a thousand blocks run, each with enough values to be worth a block.
struct SumsLaunch {
  uint32_t splits, chunk;
  dim3 grid, block;
};

SumsLaunch SumsLaunchFor(const Layout& l) {
  const uint32_t tiles = l.channels_last ? (l.c + kTileChannels - 1) / kTileChannels : l.c;
  const uint32_t min_per_split = l.channels_last ? 8 * kTileRows : 8 * kThreads;
  const uint32_t want = (1024 + tiles - 1) / tiles, most = (l.m + min_per_split - 1) / min_per_split;
  SumsLaunch s;
  s.splits = std::max(1u, std::min(want, most));
  s.chunk = (l.m + s.splits - 1) / s.splits;
  s.grid = dim3(s.splits, tiles);
  s.block = l.channels_last ? dim3(kTileChannels, kTileRows) : dim3(kThreads);
  CHECK_LE(tiles, 65535u) << "CUDA batch norm over " << l.c << " channels";
  return s;
}

template <typename Sums>
void LaunchChannelSums(const Layout& l, const SumsLaunch& s, Sums sums, float* partial, cudaStream_t stream) {
  if (l.channels_last) {
    ChannelSumsNhwc<<<s.grid, s.block, 0, stream>>>(l, s.chunk, sums, partial);
  } else {
    ChannelSumsNchw<<<s.grid, s.block, 0, stream>>>(l, s.chunk, sums, partial);
  }
  DDP_CHECK_LAUNCH("ChannelSums");
}

// Calls run(finish) with the Finish that `e` asks for.
template <typename S, typename Run>
void WithEpilogue(const BatchNormEpilogue& e, Run&& run) {
  const S* r = e.residual != nullptr ? static_cast<const S*>(e.residual->raw_data()) : nullptr;
  if (r != nullptr) {
    if (e.relu) return run(Finish<S, true, true>{r});
    return run(Finish<S, true, false>{r});
  }
  if (e.relu) return run(Finish<S, false, true>{r});
  run(Finish<S, false, false>{r});
}

template <typename S, typename Run>
void WithMask(const BatchNormEpilogueGrad& e, Run&& run) {
  const S* y = e.relu ? static_cast<const S*>(e.y->raw_data()) : nullptr;
  S* r = e.d_residual != nullptr ? static_cast<S*>(e.d_residual->raw_data()) : nullptr;
  if (r != nullptr) {
    if (e.relu) return run(MaskGrad<S, true, true>{y, r});
    return run(MaskGrad<S, false, true>{y, r});
  }
  if (e.relu) return run(MaskGrad<S, true, false>{y, r});
  run(MaskGrad<S, false, false>{y, r});
}

float* F32(Tensor& t) { return t.data<float>(); }
const float* F32(const Tensor& t) { return t.data<float>(); }

template <typename S, typename F>
void LaunchApplyForward(const Layout& l, const void* x, const float* scale, const float* shift, F finish, void* y,
                        cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(l.c) * l.m;
  ApplyForward<<<BlocksFor(n), kThreads, 0, stream>>>(l, static_cast<const S*>(x), scale, shift, finish,
                                                      static_cast<S*>(y));
  DDP_CHECK_LAUNCH("BatchNorm ApplyForward");
}

// Device scratch of one call: stage one's partial sums, then three
// per-channel arrays.
struct Workspace {
  Tensor holder;
  float* partial;
  float* channel[3];
};

Workspace WorkspaceFor(const Layout& l, const SumsLaunch& s, Device device) {
  const int64_t partial = static_cast<int64_t>(s.splits) * l.c * 2;
  Workspace w;
  w.holder = Tensor::Empty({partial + 3 * static_cast<int64_t>(l.c)}, DType::kF32, device);
  w.partial = F32(w.holder);
  for (int i = 0; i < 3; ++i) w.channel[i] = w.partial + partial + i * static_cast<int64_t>(l.c);
  return w;
}

template <typename S>
void ForwardTrainingT(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                      const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd, Tensor& running_mean,
                      Tensor& running_var, const BatchNormEpilogue& epilogue) {
  cudaStream_t stream = StreamOf(ctx);
  const Layout l = LayoutOf(x);
  const SumsLaunch s = SumsLaunchFor(l);
  const Workspace w = WorkspaceFor(l, s, x.device());
  float *partial = w.partial, *first = w.channel[0], *scale = w.channel[1], *shift = w.channel[2];
  const S* xs = static_cast<const S*>(x.raw_data());
  FirstValuesKernel<<<BlocksFor(l.c), kThreads, 0, stream>>>(l, xs, first);
  DDP_CHECK_LAUNCH("BatchNorm FirstValues");
  LaunchChannelSums(l, s, ForwardSums<S>{xs, first}, partial, stream);
  FinishStatistics<<<BlocksFor(l.c), kThreads, 0, stream>>>(
      l, s.splits, partial, first, F32(gamma), F32(beta), p.eps, p.momentum, F32(saved_mean), F32(saved_invstd),
      F32(running_mean), F32(running_var), scale, shift);
  DDP_CHECK_LAUNCH("BatchNorm FinishStatistics");
  WithEpilogue<S>(epilogue, [&](auto finish) {
    LaunchApplyForward<S>(l, xs, scale, shift, finish, y.raw_data(), stream);
  });
}

template <typename S>
void ForwardInferenceT(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                       const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                       const BatchNormEpilogue& epilogue) {
  cudaStream_t stream = StreamOf(ctx);
  const Layout l = LayoutOf(x);
  Tensor work = Tensor::Empty({2 * static_cast<int64_t>(l.c)}, DType::kF32, x.device());
  float* scale = F32(work);
  float* shift = scale + l.c;
  InferenceCoefficients<<<BlocksFor(l.c), kThreads, 0, stream>>>(l.c, p.eps, F32(gamma), F32(beta),
                                                                 F32(running_mean), F32(running_var), scale, shift);
  DDP_CHECK_LAUNCH("BatchNorm InferenceCoefficients");
  WithEpilogue<S>(epilogue, [&](auto finish) {
    LaunchApplyForward<S>(l, x.raw_data(), scale, shift, finish, y.raw_data(), stream);
  });
}

template <typename S, typename M>
void BackwardWithMask(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                      const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                      Tensor& dbeta, M mask) {
  cudaStream_t stream = StreamOf(ctx);
  const Layout l = LayoutOf(x);
  const SumsLaunch s = SumsLaunchFor(l);
  const Workspace w = WorkspaceFor(l, s, x.device());
  float *partial = w.partial, *k = w.channel[0], *mean_d = w.channel[1], *mean_d_xhat = w.channel[2];
  const S* xs = static_cast<const S*>(x.raw_data());
  const S* dys = static_cast<const S*>(dy.raw_data());
  LaunchChannelSums(l, s, BackwardSums<S, M>{xs, dys, F32(saved_mean), mask}, partial, stream);
  FinishGradients<<<BlocksFor(l.c), kThreads, 0, stream>>>(l, s.splits, partial, F32(gamma), F32(saved_invstd),
                                                           F32(dgamma), F32(dbeta), k, mean_d, mean_d_xhat);
  DDP_CHECK_LAUNCH("BatchNorm FinishGradients");
  const int64_t n = static_cast<int64_t>(l.c) * l.m;
  ApplyBackward<<<BlocksFor(n), kThreads, 0, stream>>>(l, xs, dys, F32(saved_mean), F32(saved_invstd), k, mean_d,
                                                       mean_d_xhat, mask, static_cast<S*>(dx.raw_data()));
  DDP_CHECK_LAUNCH("BatchNorm ApplyBackward");
}

template <typename S>
void BackwardT(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
               const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
               const BatchNormEpilogueGrad& epilogue) {
  WithMask<S>(epilogue, [&](auto mask) {
    BackwardWithMask<S>(ctx, x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, mask);
  });
}

}  // namespace

void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue) {
  DispatchFloat(x.dtype(), "cuda::BatchNormForwardTraining", [&](auto tag) {
    ForwardTrainingT<decltype(tag)>(ctx, p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var,
                                    epilogue);
  });
}

void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                               const BatchNormEpilogue& epilogue) {
  DispatchFloat(x.dtype(), "cuda::BatchNormForwardInference", [&](auto tag) {
    ForwardInferenceT<decltype(tag)>(ctx, p, x, gamma, beta, running_mean, running_var, y, epilogue);
  });
}

void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams&, const Tensor& x, const Tensor& dy,
                       const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                       Tensor& dgamma, Tensor& dbeta, const BatchNormEpilogueGrad& epilogue) {
  DispatchFloat(x.dtype(), "cuda::BatchNormBackward", [&](auto tag) {
    BackwardT<decltype(tag)>(ctx, x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, epilogue);
  });
}

}  // namespace ddp::cuda
