#include "runtime/ops/cuda/float16.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"
#include "runtime/ops/cuda/pooling_cuda.h"

namespace ddp::cuda {
namespace {

struct PoolShape {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
  int64_t c;            // channels: plane = n * c + k
  bool channels_last;   // NHWC memory for x, y, argmax and their gradients
};

PoolShape ShapeOf(const Pool2dParams& p, const Shape& x, const Shape& y, bool channels_last = false) {
  return {x[0] * x[1], x[2], x[3], y[2], y[3], p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
          p.count_include_pad, x[1], channels_last};
}

// Threads walk memory in order (coalesced in either format); these map a
// memory index of a tensor with `size` pixels per plane to (plane, pixel)
// and back.
struct PlanePixel {
  int64_t plane, pixel;
};

__device__ __forceinline__ PlanePixel Locate(const PoolShape& s, int64_t i, int64_t size) {
  if (!s.channels_last) return {i / size, i % size};
  const int64_t k = i % s.c, rest = i / s.c;
  return {(rest / size) * s.c + k, rest % size};
}

__device__ __forceinline__ int64_t Address(const PoolShape& s, int64_t plane, int64_t pixel, int64_t size) {
  if (!s.channels_last) return plane * size + pixel;
  return ((plane / s.c) * size + pixel) * s.c + plane % s.c;
}

// The window of output (oh, ow), clipped to the input, as the CPU's WindowAt.
struct Window {
  int64_t h0, h1, w0, w1, padded_size;
};

__device__ Window WindowAt(const PoolShape& s, int64_t oh, int64_t ow) {
  const int64_t hs = oh * s.sh - s.ph, ws = ow * s.sw - s.pw;
  const int64_t he = min(hs + s.kh, s.h + s.ph), we = min(ws + s.kw, s.w + s.pw);
  Window win;
  win.padded_size = (he - hs) * (we - ws);
  win.h0 = max(hs, int64_t{0});
  win.w0 = max(ws, int64_t{0});
  win.h1 = min(he, s.h);
  win.w1 = min(we, s.w);
  return win;
}

__device__ int64_t Divisor(const PoolShape& s, const Window& win) {
  return s.count_include_pad ? win.padded_size : (win.h1 - win.h0) * (win.w1 - win.w0);
}

// The outputs whose windows contain input row `ih`: [lo, hi).
__device__ void OutputRange(int64_t i, int64_t pad, int64_t kernel, int64_t stride, int64_t out, int64_t* lo,
                            int64_t* hi) {
  // Window o covers [o * stride - pad, o * stride - pad + kernel).
  const int64_t first = i + pad - kernel + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min((i + pad) / stride + 1, out);
}

// Max pooling and global average pooling take f32, bf16 or f16 (S); the
// maximum is exact in any type, sums run in f32.
template <typename S>
__global__ void MaxPoolForwardKernel(PoolShape s, const S* x, S* y, int32_t* argmax) {
  DDP_GRID_STRIDE(o, s.planes * s.oh * s.ow) {
    const PlanePixel out = Locate(s, o, s.oh * s.ow);
    const int64_t ow = out.pixel % s.ow, oh = out.pixel / s.ow;
    const Window win = WindowAt(s, oh, ow);
    float best = -INFINITY;
    int64_t best_index = win.h0 * s.w + win.w0;
    bool done = false;
    for (int64_t ih = win.h0; ih < win.h1 && !done; ++ih) {
      for (int64_t iw = win.w0; iw < win.w1; ++iw) {
        const float v = ToFloat(x[Address(s, out.plane, ih * s.w + iw, s.h * s.w)]);
        if (v > best || v != v) {  // NaN propagates, as in PyTorch
          best = v;
          best_index = ih * s.w + iw;
          if (v != v) {
            done = true;
            break;
          }
        }
      }
    }
    y[o] = x[Address(s, out.plane, best_index, s.h * s.w)];
    argmax[o] = static_cast<int32_t>(best_index);  // within the plane, in y's memory order
  }
}

template <typename S>
__global__ void MaxPoolBackwardKernel(PoolShape s, const S* dy, const int32_t* argmax, S* dx) {
  DDP_GRID_STRIDE(i, s.planes * s.h * s.w) {
    const PlanePixel in = Locate(s, i, s.h * s.w);
    const int64_t iw = in.pixel % s.w, ih = in.pixel / s.w;
    int64_t oh0, oh1, ow0, ow1;
    OutputRange(ih, s.ph, s.kh, s.sh, s.oh, &oh0, &oh1);
    OutputRange(iw, s.pw, s.kw, s.sw, s.ow, &ow0, &ow1);
    const int32_t me = static_cast<int32_t>(in.pixel);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = Address(s, in.plane, oh * s.ow + ow, s.oh * s.ow);
        if (argmax[o] == me) sum += ToFloat(dy[o]);
      }
    }
    dx[i] = FromFloat<S>(sum);
  }
}

__global__ void AvgPoolForwardKernel(PoolShape s, const float* x, float* y) {
  DDP_GRID_STRIDE(o, s.planes * s.oh * s.ow) {
    const int64_t ow = o % s.ow, oh = (o / s.ow) % s.oh, plane = o / (s.ow * s.oh);
    const Window win = WindowAt(s, oh, ow);
    const float* xp = x + plane * s.h * s.w;
    float sum = 0.0f;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * s.w + iw];
    y[o] = sum / static_cast<float>(Divisor(s, win));
  }
}

__global__ void AvgPoolBackwardKernel(PoolShape s, const float* dy, float* dx) {
  DDP_GRID_STRIDE(i, s.planes * s.h * s.w) {
    const int64_t iw = i % s.w, ih = (i / s.w) % s.h, plane = i / (s.w * s.h);
    int64_t oh0, oh1, ow0, ow1;
    OutputRange(ih, s.ph, s.kh, s.sh, s.oh, &oh0, &oh1);
    OutputRange(iw, s.pw, s.kw, s.sw, s.ow, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = (plane * s.oh + oh) * s.ow + ow;
        sum += dy[o] / static_cast<float>(Divisor(s, WindowAt(s, oh, ow)));
      }
    }
    dx[i] = sum;
  }
}

// One block per plane.
template <typename S>
__global__ void GlobalAvgPoolForwardKernel(int64_t size, const S* x, S* y) {
  __shared__ float shared[kThreads];
  const S* xp = x + blockIdx.x * size;
  float sum = 0.0f;
  for (int64_t k = threadIdx.x; k < size; k += blockDim.x) sum += ToFloat(xp[k]);
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) y[blockIdx.x] = FromFloat<S>(sum / static_cast<float>(size));
}

template <typename S>
__global__ void GlobalAvgPoolBackwardKernel(int64_t planes, int64_t size, const S* dy, S* dx) {
  DDP_GRID_STRIDE(i, planes * size) { dx[i] = FromFloat<S>(ToFloat(dy[i / size]) / static_cast<float>(size)); }
}

// Channels-last: one thread per (n, k), adjacent threads on adjacent
// channels; the pixels summed in order, as on the CPU.
template <typename S>
__global__ void GlobalAvgPoolForwardNhwcKernel(int64_t n, int64_t c, int64_t size, const S* x, S* y) {
  DDP_GRID_STRIDE(t, n * c) {
    const int64_t in = t / c, k = t % c;
    float sum = 0.0f;
    for (int64_t i = 0; i < size; ++i) sum += ToFloat(x[(in * size + i) * c + k]);
    y[t] = FromFloat<S>(sum / static_cast<float>(size));
  }
}

template <typename S>
__global__ void GlobalAvgPoolBackwardNhwcKernel(int64_t n, int64_t c, int64_t size, const S* dy, S* dx) {
  DDP_GRID_STRIDE(i, n * size * c) {
    const int64_t k = i % c, in = i / (size * c);
    dx[i] = FromFloat<S>(ToFloat(dy[in * c + k]) / static_cast<float>(size));
  }
}

}  // namespace

void MaxPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax) {
  const PoolShape s = ShapeOf(p, x.shape(), y.shape(), x.channels_last());
  DispatchFloat(x.dtype(), "cuda::MaxPool2dForward", [&](auto tag) {
    using S = decltype(tag);
    MaxPoolForwardKernel<S><<<BlocksFor(y.numel()), kThreads, 0, StreamOf(ctx)>>>(s, Storage<S>(x), Storage<S>(y),
                                                                                argmax.data<int32_t>());
    DDP_CHECK_LAUNCH("MaxPoolForwardKernel");
  });
}

void MaxPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, const Tensor& argmax,
                       Tensor& dx) {
  const PoolShape s = ShapeOf(p, dx.shape(), dy.shape(), dx.channels_last());
  DispatchFloat(dx.dtype(), "cuda::MaxPool2dBackward", [&](auto tag) {
    using S = decltype(tag);
    MaxPoolBackwardKernel<S><<<BlocksFor(dx.numel()), kThreads, 0, StreamOf(ctx)>>>(
        s, Storage<S>(dy), argmax.data<int32_t>(), Storage<S>(dx));
    DDP_CHECK_LAUNCH("MaxPoolBackwardKernel");
  });
}

void AvgPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y) {
  const PoolShape s = ShapeOf(p, x.shape(), y.shape());
  AvgPoolForwardKernel<<<BlocksFor(y.numel()), kThreads, 0, StreamOf(ctx)>>>(s, x.data<float>(), y.data<float>());
  DDP_CHECK_LAUNCH("AvgPoolForwardKernel");
}

void AvgPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, Tensor& dx) {
  const PoolShape s = ShapeOf(p, dx.shape(), dy.shape());
  AvgPoolBackwardKernel<<<BlocksFor(dx.numel()), kThreads, 0, StreamOf(ctx)>>>(s, dy.data<float>(), dx.data<float>());
  DDP_CHECK_LAUNCH("AvgPoolBackwardKernel");
}

void GlobalAvgPoolForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t planes = x.dim(0) * x.dim(1), size = x.dim(2) * x.dim(3);
  if (planes == 0) return;
  DispatchFloat(x.dtype(), "cuda::GlobalAvgPoolForward", [&](auto tag) {
    using S = decltype(tag);
    if (x.channels_last()) {
      GlobalAvgPoolForwardNhwcKernel<S><<<BlocksFor(planes), kThreads, 0, StreamOf(ctx)>>>(
          x.dim(0), x.dim(1), size, Storage<S>(x), Storage<S>(y));
      DDP_CHECK_LAUNCH("GlobalAvgPoolForwardNhwcKernel");
      return;
    }
    GlobalAvgPoolForwardKernel<S><<<static_cast<unsigned>(planes), kThreads, 0, StreamOf(ctx)>>>(size, Storage<S>(x),
                                                                                              Storage<S>(y));
    DDP_CHECK_LAUNCH("GlobalAvgPoolForwardKernel");
  });
}

void GlobalAvgPoolBackward(ExecutionContext& ctx, const Tensor& dy, Tensor& dx) {
  const int64_t planes = dx.dim(0) * dx.dim(1), size = dx.dim(2) * dx.dim(3);
  DispatchFloat(dx.dtype(), "cuda::GlobalAvgPoolBackward", [&](auto tag) {
    using S = decltype(tag);
    if (dx.channels_last()) {
      GlobalAvgPoolBackwardNhwcKernel<S><<<BlocksFor(dx.numel()), kThreads, 0, StreamOf(ctx)>>>(
          dx.dim(0), dx.dim(1), size, Storage<S>(dy), Storage<S>(dx));
      DDP_CHECK_LAUNCH("GlobalAvgPoolBackwardNhwcKernel");
      return;
    }
    GlobalAvgPoolBackwardKernel<S><<<BlocksFor(dx.numel()), kThreads, 0, StreamOf(ctx)>>>(planes, size, Storage<S>(dy),
                                                                                        Storage<S>(dx));
    DDP_CHECK_LAUNCH("GlobalAvgPoolBackwardKernel");
  });
}

}  // namespace ddp::cuda
