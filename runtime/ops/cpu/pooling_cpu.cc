#include "runtime/ops/cpu/pooling_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/ops/cpu/float_types.h"

namespace ddp::cpu {
namespace {

// The window of output (oh, ow), clipped to the input.
struct Window {
  int64_t h0, h1, w0, w1;  // [h0, h1) x [w0, w1) inside the input
  int64_t padded_size;     // window size counting padding, clipped to the padded input
};

Window WindowAt(const Pool2dParams& p, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  const int64_t hs = oh * p.stride_h - p.pad_h, ws = ow * p.stride_w - p.pad_w;
  const int64_t he = std::min(hs + p.kernel_h, h + p.pad_h), we = std::min(ws + p.kernel_w, w + p.pad_w);
  Window win;
  win.padded_size = (he - hs) * (we - ws);
  win.h0 = std::max<int64_t>(hs, 0);
  win.w0 = std::max<int64_t>(ws, 0);
  win.h1 = std::min(he, h);
  win.w1 = std::min(we, w);
  return win;
}

int64_t Divisor(const Pool2dParams& p, const Window& win) {
  return p.count_include_pad ? win.padded_size : (win.h1 - win.h0) * (win.w1 - win.w0);
}

}  // namespace

// Channels-last max pooling: channels innermost, so each window position is
// a vector over C. argmax holds, per output element (in NHWC order), the
// winner's index within its H x W plane, as for NCHW.
template <typename T>
void MaxPoolForwardNhwc(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), oh_n = y.dim(2), ow_n = y.dim(3);
  const T* xd = Elements<T>(x);
  T* yd = Elements<T>(y);
  int32_t* ad = argmax.data<int32_t>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      std::vector<float> best(c);
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window win = WindowAt(p, h, w, oh, ow);
        const int64_t o = ((in * oh_n + oh) * ow_n + ow) * c;
        std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
        const int32_t first = static_cast<int32_t>(win.h0 * w + win.w0);
        for (int64_t k = 0; k < c; ++k) ad[o + k] = first;
        for (int64_t ih = win.h0; ih < win.h1; ++ih) {
          for (int64_t iw = win.w0; iw < win.w1; ++iw) {
            const T* xp = xd + ((in * h + ih) * w + iw) * c;
            const int32_t index = static_cast<int32_t>(ih * w + iw);
            for (int64_t k = 0; k < c; ++k) {
              const float v = ToFloat(xp[k]);
              // NaN propagates (the first NaN wins and stays), as in PyTorch.
              if ((v > best[k] || v != v) && best[k] == best[k]) {
                best[k] = v;
                ad[o + k] = index;
              }
            }
          }
        }
        for (int64_t k = 0; k < c; ++k) yd[o + k] = xd[((in * h) * w + ad[o + k]) * c + k];
      }
    }
  }
}

template <typename T>
void MaxPoolBackwardNhwc(const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  const int64_t n = dx.dim(0), c = dx.dim(1), in_plane = dx.dim(2) * dx.dim(3), out_plane = dy.dim(2) * dy.dim(3);
  const T* dyd = Elements<T>(dy);
  const int32_t* ad = argmax.data<int32_t>();
  T* dxd = Elements<T>(dx);
  std::vector<float> sums;
#pragma omp parallel for schedule(static) firstprivate(sums)
  for (int64_t in = 0; in < n; ++in) {
    sums.assign(in_plane * c, 0.0f);
    for (int64_t o = 0; o < out_plane; ++o) {
      const int64_t base = (in * out_plane + o) * c;
      for (int64_t k = 0; k < c; ++k) sums[ad[base + k] * c + k] += ToFloat(dyd[base + k]);
    }
    T* dxp = dxd + in * in_plane * c;
    for (int64_t i = 0; i < in_plane * c; ++i) dxp[i] = FromFloat<T>(sums[i]);
  }
}

template <typename T>
void GlobalAvgPoolForwardNhwc(const Tensor& x, Tensor& y) {
  const int64_t n = x.dim(0), c = x.dim(1), size = x.dim(2) * x.dim(3);
  const T* xd = Elements<T>(x);
  T* yd = Elements<T>(y);
#pragma omp parallel for schedule(static)
  for (int64_t in = 0; in < n; ++in) {
    std::vector<float> sum(c, 0.0f);
    for (int64_t i = 0; i < size; ++i) {
      const T* xp = xd + (in * size + i) * c;
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) sum[k] += ToFloat(xp[k]);
    }
    for (int64_t k = 0; k < c; ++k) yd[in * c + k] = FromFloat<T>(sum[k] / static_cast<float>(size));
  }
}

template <typename T>
void GlobalAvgPoolBackwardNhwc(const Tensor& dy, Tensor& dx) {
  const int64_t n = dx.dim(0), c = dx.dim(1), size = dx.dim(2) * dx.dim(3);
  const T* dyd = Elements<T>(dy);
  T* dxd = Elements<T>(dx);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t i = 0; i < size; ++i) {
      T* dxp = dxd + (in * size + i) * c;
      for (int64_t k = 0; k < c; ++k) dxp[k] = FromFloat<T>(ToFloat(dyd[in * c + k]) / static_cast<float>(size));
    }
  }
}

void MaxPool2dForward(ExecutionContext&, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax) {
  if (x.channels_last()) {
    return DispatchFloat(x.dtype(), "MaxPool2dForward",
                         [&](auto tag) { MaxPoolForwardNhwc<decltype(tag)>(p, x, y, argmax); });
  }
  DispatchFloat(x.dtype(), "MaxPool2dForward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3), oh_n = y.dim(2), ow_n = y.dim(3);
    const T* xd = Elements<T>(x);
    T* yd = Elements<T>(y);
    int32_t* ad = argmax.data<int32_t>();
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* xp = xd + plane * h * w;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const Window win = WindowAt(p, h, w, oh, ow);
          float best = -std::numeric_limits<float>::infinity();
          int64_t best_index = win.h0 * w + win.w0;
          // NaN propagates, as in PyTorch: the first NaN in the window wins
          // (leaving both loops, as the channels-last and CUDA kernels do).
          bool found_nan = false;
          for (int64_t ih = win.h0; ih < win.h1 && !found_nan; ++ih) {
            for (int64_t iw = win.w0; iw < win.w1; ++iw) {
              const float v = ToFloat(xp[ih * w + iw]);
              if (v > best || std::isnan(v)) {
                best = v;
                best_index = ih * w + iw;
                if (std::isnan(v)) {
                  found_nan = true;
                  break;
                }
              }
            }
          }
          const int64_t o = (plane * oh_n + oh) * ow_n + ow;
          yd[o] = xp[best_index];  // exact in any storage type
          ad[o] = static_cast<int32_t>(best_index);
        }
      }
    }
  });
}

void MaxPool2dBackward(ExecutionContext&, const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  if (dx.channels_last()) {
    return DispatchFloat(dx.dtype(), "MaxPool2dBackward",
                         [&](auto tag) { MaxPoolBackwardNhwc<decltype(tag)>(dy, argmax, dx); });
  }
  DispatchFloat(dx.dtype(), "MaxPool2dBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t planes = dx.dim(0) * dx.dim(1), in_plane = dx.dim(2) * dx.dim(3);
    const int64_t out_plane = dy.dim(2) * dy.dim(3);
    const T* dyd = Elements<T>(dy);
    const int32_t* ad = argmax.data<int32_t>();
    T* dxd = Elements<T>(dx);
    // Windows overlap, so one input can collect several gradients: sum each
    // plane in f32, round once.
    std::vector<float> sums;
#pragma omp parallel for schedule(static) firstprivate(sums)
    for (int64_t plane = 0; plane < planes; ++plane) {
      sums.assign(in_plane, 0.0f);
      for (int64_t o = plane * out_plane; o < (plane + 1) * out_plane; ++o) sums[ad[o]] += ToFloat(dyd[o]);
      T* dxp = dxd + plane * in_plane;
      for (int64_t i = 0; i < in_plane; ++i) dxp[i] = FromFloat<T>(sums[i]);
    }
  });
}

void AvgPool2dForward(ExecutionContext&, const Pool2dParams& p, const Tensor& x, Tensor& y) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3), oh_n = y.dim(2), ow_n = y.dim(3);
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* xp = xd + plane * h * w;
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window win = WindowAt(p, h, w, oh, ow);
        float sum = 0.0f;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * w + iw];
        yd[(plane * oh_n + oh) * ow_n + ow] = sum / static_cast<float>(Divisor(p, win));
      }
    }
  }
}

void AvgPool2dBackward(ExecutionContext&, const Pool2dParams& p, const Tensor& dy, Tensor& dx) {
  const int64_t planes = dx.dim(0) * dx.dim(1), h = dx.dim(2), w = dx.dim(3), oh_n = dy.dim(2), ow_n = dy.dim(3);
  const float* dyd = dy.data<float>();
  float* dxd = dx.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    float* dxp = dxd + plane * h * w;
    std::fill(dxp, dxp + h * w, 0.0f);
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window win = WindowAt(p, h, w, oh, ow);
        const float g = dyd[(plane * oh_n + oh) * ow_n + ow] / static_cast<float>(Divisor(p, win));
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) dxp[ih * w + iw] += g;
      }
    }
  }
}

void GlobalAvgPoolForward(ExecutionContext&, const Tensor& x, Tensor& y) {
  if (x.channels_last()) {
    return DispatchFloat(x.dtype(), "GlobalAvgPoolForward",
                         [&](auto tag) { GlobalAvgPoolForwardNhwc<decltype(tag)>(x, y); });
  }
  DispatchFloat(x.dtype(), "GlobalAvgPoolForward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t planes = x.dim(0) * x.dim(1), size = x.dim(2) * x.dim(3);
    const T* xd = Elements<T>(x);
    T* yd = Elements<T>(y);
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* xp = xd + plane * size;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t k = 0; k < size; ++k) sum += ToFloat(xp[k]);
      yd[plane] = FromFloat<T>(sum / static_cast<float>(size));
    }
  });
}

void GlobalAvgPoolBackward(ExecutionContext&, const Tensor& dy, Tensor& dx) {
  if (dx.channels_last()) {
    return DispatchFloat(dx.dtype(), "GlobalAvgPoolBackward",
                         [&](auto tag) { GlobalAvgPoolBackwardNhwc<decltype(tag)>(dy, dx); });
  }
  DispatchFloat(dx.dtype(), "GlobalAvgPoolBackward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t planes = dx.dim(0) * dx.dim(1), size = dx.dim(2) * dx.dim(3);
    const T* dyd = Elements<T>(dy);
    T* dxd = Elements<T>(dx);
#pragma omp parallel for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      std::fill(dxd + plane * size, dxd + (plane + 1) * size,
                FromFloat<T>(ToFloat(dyd[plane]) / static_cast<float>(size)));
    }
  });
}

}  // namespace ddp::cpu
