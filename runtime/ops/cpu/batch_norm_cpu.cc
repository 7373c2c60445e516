#include "runtime/ops/cpu/batch_norm_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/ops/cpu/float_types.h"

namespace ddp::cpu {
namespace {

// x viewed as [N, C, S]: S is H*W, or 1 for NC input.
struct ChannelLayout {
  int64_t n, c, s;
  explicit ChannelLayout(const Tensor& x) : n(x.dim(0)), c(x.dim(1)), s(x.numel() / (x.dim(0) * x.dim(1))) {}
  int64_t count() const { return n * s; }
  template <typename T>
  T* plane(T* base, int64_t in, int64_t ic) const {
    return base + (in * c + ic) * s;
  }
};

// Applies y = x * scale[c] + shift[c].
template <typename T>
void ScaleShift(const ChannelLayout& l, const T* x, const float* scale, const float* shift, T* y) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t in = 0; in < l.n; ++in) {
    for (int64_t ic = 0; ic < l.c; ++ic) {
      const float a = scale[ic], b = shift[ic];
      const T* xp = l.plane(x, in, ic);
      T* yp = l.plane(y, in, ic);
#pragma omp simd
      for (int64_t k = 0; k < l.s; ++k) yp[k] = FromFloat<T>(ToFloat(xp[k]) * a + b);
    }
  }
}

template <typename T>
void ForwardTraining(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                     Tensor& saved_mean, Tensor& saved_invstd, Tensor& running_mean, Tensor& running_var) {
  const ChannelLayout l(x);
  const T* xd = Elements<T>(x);
  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  float* mean_out = saved_mean.data<float>();
  float* invstd_out = saved_invstd.data<float>();
  float* rm = running_mean.data<float>();
  float* rv = running_var.data<float>();
  std::vector<float> scale(l.c), shift(l.c);
  const double count = static_cast<double>(l.count());

#pragma omp parallel for schedule(static)
  for (int64_t ic = 0; ic < l.c; ++ic) {
    // Two passes in double: the mean, then the centred sum of squares, so a
    // large mean does not cancel the variance.
    double sum = 0.0;
    for (int64_t in = 0; in < l.n; ++in) {
      const T* xp = l.plane(xd, in, ic);
      float partial = 0.0f;
#pragma omp simd reduction(+ : partial)
      for (int64_t k = 0; k < l.s; ++k) partial += ToFloat(xp[k]);
      sum += partial;
    }
    const double mean = sum / count;
    double sq = 0.0;
    for (int64_t in = 0; in < l.n; ++in) {
      const T* xp = l.plane(xd, in, ic);
      const float m = static_cast<float>(mean);
      float partial = 0.0f;
#pragma omp simd reduction(+ : partial)
      for (int64_t k = 0; k < l.s; ++k) {
        const float d = ToFloat(xp[k]) - m;
        partial += d * d;
      }
      sq += partial;
    }
    const double var = sq / count;
    const double invstd = 1.0 / std::sqrt(var + p.eps);
    mean_out[ic] = static_cast<float>(mean);
    invstd_out[ic] = static_cast<float>(invstd);
    rm[ic] = static_cast<float>((1.0 - p.momentum) * rm[ic] + p.momentum * mean);
    rv[ic] = static_cast<float>((1.0 - p.momentum) * rv[ic] + p.momentum * var * count / (count - 1.0));
    scale[ic] = static_cast<float>(g[ic] * invstd);
    shift[ic] = static_cast<float>(b[ic] - mean * g[ic] * invstd);
  }
  ScaleShift(l, xd, scale.data(), shift.data(), Elements<T>(y));
}

template <typename T>
void Backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
              const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const ChannelLayout l(x);
  const T* xd = Elements<T>(x);
  const T* dyd = Elements<T>(dy);
  T* dxd = Elements<T>(dx);
  const double count = static_cast<double>(l.count());

#pragma omp parallel for schedule(static)
  for (int64_t ic = 0; ic < l.c; ++ic) {
    const float mean = saved_mean.data<float>()[ic];
    const float invstd = saved_invstd.data<float>()[ic];
    // dbeta = sum(dy); dgamma = sum(dy * xhat).
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t in = 0; in < l.n; ++in) {
      const T* xp = l.plane(xd, in, ic);
      const T* dyp = l.plane(dyd, in, ic);
      float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
      for (int64_t k = 0; k < l.s; ++k) {
        const float d = ToFloat(dyp[k]);
        a += d;
        b += d * (ToFloat(xp[k]) - mean);
      }
      sum_dy += a;
      sum_dy_xhat += b;
    }
    sum_dy_xhat *= invstd;
    dbeta.data<float>()[ic] = static_cast<float>(sum_dy);
    dgamma.data<float>()[ic] = static_cast<float>(sum_dy_xhat);
    // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
    const float k_scale = gamma.data<float>()[ic] * invstd;
    const float mean_dy = static_cast<float>(sum_dy / count);
    const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
    for (int64_t in = 0; in < l.n; ++in) {
      const T* xp = l.plane(xd, in, ic);
      const T* dyp = l.plane(dyd, in, ic);
      T* dxp = l.plane(dxd, in, ic);
#pragma omp simd
      for (int64_t k = 0; k < l.s; ++k) {
        const float xhat = (ToFloat(xp[k]) - mean) * invstd;
        dxp[k] = FromFloat<T>(k_scale * (ToFloat(dyp[k]) - mean_dy - xhat * mean_dy_xhat));
      }
    }
  }
}

// Channels-last: x viewed as [rows, C] with rows = N*H*W. Per-channel sums
// run over fixed blocks of rows (f32 within a block, then the blocks added
// in order in f64), so the result does not depend on the thread count.
constexpr int64_t kRowBlock = 256;

// For every channel k: out1[k] = sum of f1(r, k), out2[k] = sum of f2(r, k)
// over the rows.
template <typename F1, typename F2>
void ChannelSums(int64_t rows, int64_t c, F1 f1, F2 f2, std::vector<double>* out1, std::vector<double>* out2) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial1(blocks * c), partial2(blocks * c);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float* p1 = partial1.data() + b * c;
    float* p2 = partial2.data() + b * c;
    std::fill(p1, p1 + c, 0.0f);
    std::fill(p2, p2 + c, 0.0f);
    for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) {
        p1[k] += f1(r, k);
        p2[k] += f2(r, k);
      }
    }
  }
  out1->assign(c, 0.0);
  out2->assign(c, 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t k = 0; k < c; ++k) {
      (*out1)[k] += partial1[b * c + k];
      (*out2)[k] += partial2[b * c + k];
    }
  }
}

// y[r, k] = x[r, k] * scale[k] + shift[k].
template <typename T>
void ScaleShiftRows(int64_t rows, int64_t c, const T* x, const float* scale, const float* shift, T* y) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * c;
    T* yr = y + r * c;
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) yr[k] = FromFloat<T>(ToFloat(xr[k]) * scale[k] + shift[k]);
  }
}

template <typename T>
void ForwardTrainingNhwc(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         Tensor& y, Tensor& saved_mean, Tensor& saved_invstd, Tensor& running_mean,
                         Tensor& running_var) {
  const int64_t c = x.dim(1), rows = x.numel() / c;
  const T* xd = Elements<T>(x);
  std::vector<double> sum, unused, sq;
  ChannelSums(
      rows, c, [&](int64_t r, int64_t k) { return ToFloat(xd[r * c + k]); }, [](int64_t, int64_t) { return 0.0f; },
      &sum, &unused);
  std::vector<float> mean(c);
  for (int64_t k = 0; k < c; ++k) mean[k] = static_cast<float>(sum[k] / static_cast<double>(rows));
  const float* m = mean.data();
  ChannelSums(
      rows, c,
      [&](int64_t r, int64_t k) {
        const float d = ToFloat(xd[r * c + k]) - m[k];
        return d * d;
      },
      [](int64_t, int64_t) { return 0.0f; }, &sq, &unused);
  std::vector<float> scale(c), shift(c);
  const double count = static_cast<double>(rows);
  for (int64_t k = 0; k < c; ++k) {
    const double mu = sum[k] / count, var = sq[k] / count, invstd = 1.0 / std::sqrt(var + p.eps);
    const double g = gamma.data<float>()[k];
    saved_mean.data<float>()[k] = static_cast<float>(mu);
    saved_invstd.data<float>()[k] = static_cast<float>(invstd);
    float& rm = running_mean.data<float>()[k];
    float& rv = running_var.data<float>()[k];
    rm = static_cast<float>((1.0 - p.momentum) * rm + p.momentum * mu);
    rv = static_cast<float>((1.0 - p.momentum) * rv + p.momentum * var * count / (count - 1.0));
    scale[k] = static_cast<float>(g * invstd);
    shift[k] = static_cast<float>(beta.data<float>()[k] - mu * g * invstd);
  }
  ScaleShiftRows(rows, c, xd, scale.data(), shift.data(), Elements<T>(y));
}

template <typename T>
void BackwardNhwc(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                  const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t c = x.dim(1), rows = x.numel() / c;
  const T* xd = Elements<T>(x);
  const T* dyd = Elements<T>(dy);
  const float* mean = saved_mean.data<float>();
  const float* invstd = saved_invstd.data<float>();
  std::vector<double> sum_dy, sum_dy_xc;  // sum(dy), sum(dy * (x - mean))
  ChannelSums(
      rows, c, [&](int64_t r, int64_t k) { return ToFloat(dyd[r * c + k]); },
      [&](int64_t r, int64_t k) { return ToFloat(dyd[r * c + k]) * (ToFloat(xd[r * c + k]) - mean[k]); }, &sum_dy,
      &sum_dy_xc);
  std::vector<float> k_scale(c), mean_dy(c), mean_dy_xhat(c);
  const double count = static_cast<double>(rows);
  for (int64_t k = 0; k < c; ++k) {
    const double dg = sum_dy_xc[k] * invstd[k];
    dbeta.data<float>()[k] = static_cast<float>(sum_dy[k]);
    dgamma.data<float>()[k] = static_cast<float>(dg);
    k_scale[k] = gamma.data<float>()[k] * invstd[k];
    mean_dy[k] = static_cast<float>(sum_dy[k] / count);
    mean_dy_xhat[k] = static_cast<float>(dg / count);
  }
  T* dxd = Elements<T>(dx);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) {
      const float xhat = (ToFloat(xd[r * c + k]) - mean[k]) * invstd[k];
      dxd[r * c + k] = FromFloat<T>(k_scale[k] * (ToFloat(dyd[r * c + k]) - mean_dy[k] - xhat * mean_dy_xhat[k]));
    }
  }
}

}  // namespace

// Activations (x, y, dy, dx) are f32 or bf16, contiguous (NCHW) or
// channels-last; statistics and parameters f32.
void BatchNormForwardTraining(ExecutionContext&, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var) {
  DispatchFloat(x.dtype(), "BatchNormForwardTraining", [&](auto tag) {
    if (x.channels_last()) {
      ForwardTrainingNhwc<decltype(tag)>(p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var);
    } else {
      ForwardTraining<decltype(tag)>(p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var);
    }
  });
}

void BatchNormForwardInference(ExecutionContext&, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                               Tensor& y) {
  const ChannelLayout l(x);
  std::vector<float> scale(l.c), shift(l.c);
  for (int64_t ic = 0; ic < l.c; ++ic) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var.data<float>()[ic]) + p.eps);
    const double g = gamma.data<float>()[ic];
    scale[ic] = static_cast<float>(g * invstd);
    shift[ic] = static_cast<float>(beta.data<float>()[ic] - running_mean.data<float>()[ic] * g * invstd);
  }
  DispatchFloat(x.dtype(), "BatchNormForwardInference", [&](auto tag) {
    using T = decltype(tag);
    if (x.channels_last()) {
      ScaleShiftRows(x.numel() / l.c, l.c, Elements<T>(x), scale.data(), shift.data(), Elements<T>(y));
    } else {
      ScaleShift(l, Elements<T>(x), scale.data(), shift.data(), Elements<T>(y));
    }
  });
}

void BatchNormBackward(ExecutionContext&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta) {
  DispatchFloat(x.dtype(), "BatchNormBackward", [&](auto tag) {
    if (x.channels_last()) {
      BackwardNhwc<decltype(tag)>(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta);
    } else {
      Backward<decltype(tag)>(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta);
    }
  });
}

}  // namespace ddp::cpu
