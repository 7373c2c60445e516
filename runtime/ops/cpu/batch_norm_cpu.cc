#include "runtime/ops/cpu/batch_norm_cpu.h"

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

}  // namespace

// Activations (x, y, dy, dx) are f32 or bf16; statistics and parameters f32.
void BatchNormForwardTraining(ExecutionContext&, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var) {
  DispatchFloat(x.dtype(), "BatchNormForwardTraining", [&](auto tag) {
    ForwardTraining<decltype(tag)>(p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var);
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
    ScaleShift(l, Elements<T>(x), scale.data(), shift.data(), Elements<T>(y));
  });
}

void BatchNormBackward(ExecutionContext&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta) {
  DispatchFloat(x.dtype(), "BatchNormBackward", [&](auto tag) {
    Backward<decltype(tag)>(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta);
  });
}

}  // namespace ddp::cpu
