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

// ReLU that lets NaN through, as ReluForward.
inline float Relu(float v) { return v > 0.0f || v != v ? v : 0.0f; }

// The forward's epilogue on element i: relu?(v + residual?[i]).
template <typename T, bool kResidual, bool kRelu>
struct Finish {
  const T* residual;
  float operator()(float v, int64_t i) const {
    if constexpr (kResidual) v += ToFloat(residual[i]);
    if constexpr (kRelu) v = Relu(v);
    return v;
  }
};

// Calls run(finish) with the Finish that `e` asks for.
template <typename T, typename Run>
void WithEpilogue(const BatchNormEpilogue& e, Run&& run) {
  const T* r = e.residual != nullptr ? Elements<T>(*e.residual) : nullptr;
  if (r != nullptr) {
    if (e.relu) return run(Finish<T, true, true>{r});
    return run(Finish<T, true, false>{r});
  }
  if (e.relu) return run(Finish<T, false, true>{r});
  run(Finish<T, false, false>{r});
}

// The backward's view of the output gradient on element i: d, masked by the
// ReLU (kept where the forward's output y is positive or NaN, as
// ReluBackward). With kWrite the masked value is also stored to
// d_residual[i], the residual's gradient; a select, so it is exact.
template <typename T, bool kReluMask, bool kWrite>
struct MaskGrad {
  const T* y;
  T* d_residual;
  static constexpr bool kRelu = kReluMask;
  static constexpr bool kWritesResidual = kWrite;
  float operator()(float d, int64_t i) const {
    if constexpr (kReluMask) {
      const float v = ToFloat(y[i]);
      d = v > 0.0f || v != v ? d : 0.0f;
    }
    if constexpr (kWrite) d_residual[i] = FromFloat<T>(d);
    return d;
  }
};

template <typename T, typename Run>
void WithMask(const BatchNormEpilogueGrad& e, Run&& run) {
  const T* y = e.relu ? Elements<T>(*e.y) : nullptr;
  T* r = e.d_residual != nullptr ? Elements<T>(*e.d_residual) : nullptr;
  if (r != nullptr) {
    if (e.relu) return run(MaskGrad<T, true, true>{y, r});
    return run(MaskGrad<T, false, true>{y, r});
  }
  if (e.relu) return run(MaskGrad<T, true, false>{y, r});
  run(MaskGrad<T, false, false>{y, r});
}

// Applies y = finish(x * scale[c] + shift[c]).
template <typename T, typename F>
void ScaleShift(const ChannelLayout& l, const T* x, const float* scale, const float* shift, F finish, T* y) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t in = 0; in < l.n; ++in) {
    for (int64_t ic = 0; ic < l.c; ++ic) {
      const float a = scale[ic], b = shift[ic];
      const int64_t base = (in * l.c + ic) * l.s;
#pragma omp simd
      for (int64_t k = 0; k < l.s; ++k) y[base + k] = FromFloat<T>(finish(ToFloat(x[base + k]) * a + b, base + k));
    }
  }
}

template <typename T>
void ForwardTraining(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                     Tensor& saved_mean, Tensor& saved_invstd, Tensor& running_mean, Tensor& running_var,
                     const BatchNormEpilogue& epilogue) {
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
  WithEpilogue<T>(epilogue,
                  [&](auto finish) { ScaleShift(l, xd, scale.data(), shift.data(), finish, Elements<T>(y)); });
}

// The masked gradient of element i in a second pass: read back from the
// residual's gradient where the first pass wrote it, else masked again.
template <typename T, typename M>
inline float MaskedAgain(const M& mask, const T* dy, int64_t i) {
  if constexpr (M::kWritesResidual) {
    return ToFloat(mask.d_residual[i]);
  } else {
    return mask(ToFloat(dy[i]), i);
  }
}

// `mask` is a MaskGrad: the first pass masks dy (and writes the residual's
// gradient), the second reads that gradient back instead of masking again.
template <typename T, typename M>
void Backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
              const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, M mask) {
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
      const int64_t base = (in * l.c + ic) * l.s;
      float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
      for (int64_t k = 0; k < l.s; ++k) {
        const float d = mask(ToFloat(dyd[base + k]), base + k);
        a += d;
        b += d * (ToFloat(xd[base + k]) - mean);
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
      const int64_t base = (in * l.c + ic) * l.s;
#pragma omp simd
      for (int64_t k = 0; k < l.s; ++k) {
        const float xhat = (ToFloat(xd[base + k]) - mean) * invstd;
        dxd[base + k] = FromFloat<T>(k_scale * (MaskedAgain(mask, dyd, base + k) - mean_dy - xhat * mean_dy_xhat));
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

// y[r, k] = finish(x[r, k] * scale[k] + shift[k]).
template <typename T, typename F>
void ScaleShiftRows(int64_t rows, int64_t c, const T* x, const float* scale, const float* shift, F finish, T* y) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * c;
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) {
      y[base + k] = FromFloat<T>(finish(ToFloat(x[base + k]) * scale[k] + shift[k], base + k));
    }
  }
}

template <typename T>
void ForwardTrainingNhwc(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         Tensor& y, Tensor& saved_mean, Tensor& saved_invstd, Tensor& running_mean,
                         Tensor& running_var, const BatchNormEpilogue& epilogue) {
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
  WithEpilogue<T>(epilogue, [&](auto finish) {
    ScaleShiftRows(rows, c, xd, scale.data(), shift.data(), finish, Elements<T>(y));
  });
}

template <typename T, typename M>
void BackwardNhwc(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                  const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, M mask) {
  const int64_t c = x.dim(1), rows = x.numel() / c;
  const T* xd = Elements<T>(x);
  const T* dyd = Elements<T>(dy);
  const float* mean = saved_mean.data<float>();
  const float* invstd = saved_invstd.data<float>();
  std::vector<double> sum_dy, sum_dy_xc;  // sum(dy), sum(dy * (x - mean))
  // The first sum masks (and writes the residual's gradient); the second
  // reads the same masked value without writing it again.
  const MaskGrad<T, M::kRelu, false> mask_only{mask.y, nullptr};
  ChannelSums(
      rows, c, [&](int64_t r, int64_t k) { return mask(ToFloat(dyd[r * c + k]), r * c + k); },
      [&](int64_t r, int64_t k) {
        return mask_only(ToFloat(dyd[r * c + k]), r * c + k) * (ToFloat(xd[r * c + k]) - mean[k]);
      },
      &sum_dy, &sum_dy_xc);
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
      const float d = MaskedAgain(mask, dyd, r * c + k);
      dxd[r * c + k] = FromFloat<T>(k_scale[k] * (d - mean_dy[k] - xhat * mean_dy_xhat[k]));
    }
  }
}

}  // namespace

// Activations (x, y, dy, dx) are f32 or bf16, contiguous (NCHW) or
// channels-last; statistics and parameters f32.
void BatchNormForwardTraining(ExecutionContext&, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue) {
  DispatchFloat(x.dtype(), "BatchNormForwardTraining", [&](auto tag) {
    using T = decltype(tag);
    if (x.channels_last()) {
      ForwardTrainingNhwc<T>(p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var, epilogue);
    } else {
      ForwardTraining<T>(p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var, epilogue);
    }
  });
}

void BatchNormForwardInference(ExecutionContext&, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                               Tensor& y, const BatchNormEpilogue& epilogue) {
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
    WithEpilogue<T>(epilogue, [&](auto finish) {
      if (x.channels_last()) {
        ScaleShiftRows(x.numel() / l.c, l.c, Elements<T>(x), scale.data(), shift.data(), finish, Elements<T>(y));
      } else {
        ScaleShift(l, Elements<T>(x), scale.data(), shift.data(), finish, Elements<T>(y));
      }
    });
  });
}

void BatchNormBackward(ExecutionContext&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta, const BatchNormEpilogueGrad& epilogue) {
  DispatchFloat(x.dtype(), "BatchNormBackward", [&](auto tag) {
    using T = decltype(tag);
    WithMask<T>(epilogue, [&](auto mask) {
      if (x.channels_last()) {
        BackwardNhwc<T>(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, mask);
      } else {
        Backward<T>(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, mask);
      }
    });
  });
}

}  // namespace ddp::cpu
