#include "runtime/testing/reference_ops.h"

#include <cmath>
#include <limits>

#include <glog/logging.h>

namespace ddp::testing {

Vec RefConv2d(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws, const Vec& bias, const RefConv2dParams& p,
              Shape* out_shape) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  CHECK_EQ(cg * p.groups, c);
  const int64_t og = o / p.groups;
  const int64_t oh = (h + 2 * p.pad_h - p.dilation_h * (kh - 1) - 1) / p.stride_h + 1;
  const int64_t ow = (wd + 2 * p.pad_w - p.dilation_w * (kw - 1) - 1) / p.stride_w + 1;
  *out_shape = {n, o, oh, ow};
  Vec y(n * o * oh * ow, 0.0);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t g = oc / og;
      for (int64_t y0 = 0; y0 < oh; ++y0)
        for (int64_t x0 = 0; x0 < ow; ++x0) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y0 * p.stride_h - p.pad_h + ky * p.dilation_h;
                const int64_t ix = x0 * p.stride_w - p.pad_w + kx * p.dilation_w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += x[((in * c + g * cg + ic) * h + iy) * wd + ix] * w[((oc * cg + ic) * kh + ky) * kw + kx];
              }
          y[((in * o + oc) * oh + y0) * ow + x0] = acc;
        }
    }
  return y;
}

namespace {

// Calls fn(channel, flat index) for every element of an [N, C, ...] tensor.
template <typename Fn>
void ForEachByChannel(const Shape& xs, Fn fn) {
  const int64_t n = xs[0], c = xs[1];
  int64_t s = 1;
  for (size_t i = 2; i < xs.size(); ++i) s *= xs[i];
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t k = 0; k < s; ++k) fn(ic, (in * c + ic) * s + k);
}

}  // namespace

Vec RefBatchNormTraining(const Vec& x, const Shape& xs, const Vec& gamma, const Vec& beta, double eps,
                         Vec* batch_mean, Vec* batch_var) {
  const int64_t c = xs[1];
  const double count = static_cast<double>(x.size()) / static_cast<double>(c);
  Vec mean(c, 0.0), var(c, 0.0);
  ForEachByChannel(xs, [&](int64_t ic, int64_t i) { mean[ic] += x[i] / count; });
  ForEachByChannel(xs, [&](int64_t ic, int64_t i) { var[ic] += (x[i] - mean[ic]) * (x[i] - mean[ic]) / count; });
  if (batch_mean) *batch_mean = mean;
  if (batch_var) *batch_var = var;
  return RefBatchNormInference(x, xs, gamma, beta, mean, var, eps);
}

Vec RefBatchNormInference(const Vec& x, const Shape& xs, const Vec& gamma, const Vec& beta, const Vec& mean,
                          const Vec& var, double eps) {
  Vec y(x.size());
  ForEachByChannel(xs, [&](int64_t ic, int64_t i) {
    y[i] = (x[i] - mean[ic]) / std::sqrt(var[ic] + eps) * gamma[ic] + beta[ic];
  });
  return y;
}

Vec RefRelu(const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
  return y;
}

Vec RefAdd(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

namespace {

template <typename Reduce>
Vec RefPool(const Vec& x, const Shape& xs, const RefPoolParams& p, Shape* out_shape, Reduce reduce) {
  const int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3];
  const int64_t oh = (h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  const int64_t ow = (w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  *out_shape = {xs[0], xs[1], oh, ow};
  Vec y(planes * oh * ow);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t y0 = 0; y0 < oh; ++y0)
      for (int64_t x0 = 0; x0 < ow; ++x0) {
        std::vector<double> window;
        int64_t padded = 0;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky)
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t iy = y0 * p.stride_h - p.pad_h + ky, ix = x0 * p.stride_w - p.pad_w + kx;
            if (iy >= h + p.pad_h || ix >= w + p.pad_w) continue;  // beyond the padded input
            ++padded;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w) window.push_back(x[(pl * h + iy) * w + ix]);
          }
        y[(pl * oh + y0) * ow + x0] = reduce(window, padded);
      }
  return y;
}

}  // namespace

Vec RefMaxPool2d(const Vec& x, const Shape& xs, const RefPoolParams& p, Shape* out_shape) {
  return RefPool(x, xs, p, out_shape, [](const std::vector<double>& win, int64_t) {
    double best = -std::numeric_limits<double>::infinity();
    for (double v : win) best = std::max(best, v);
    return best;
  });
}

Vec RefAvgPool2d(const Vec& x, const Shape& xs, const RefPoolParams& p, Shape* out_shape) {
  return RefPool(x, xs, p, out_shape, [&](const std::vector<double>& win, int64_t padded) {
    double sum = 0.0;
    for (double v : win) sum += v;
    return sum / static_cast<double>(p.count_include_pad ? padded : static_cast<int64_t>(win.size()));
  });
}

Vec RefGlobalAvgPool(const Vec& x, const Shape& xs) {
  const int64_t planes = xs[0] * xs[1], size = xs[2] * xs[3];
  Vec y(planes, 0.0);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t k = 0; k < size; ++k) y[pl] += x[pl * size + k] / static_cast<double>(size);
  return y;
}

Vec RefLinear(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws, const Vec& bias) {
  const int64_t n = xs[0], in = xs[1], out = ws[0];
  CHECK_EQ(ws[1], in);
  Vec y(n * out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias.empty() ? 0.0 : bias[o];
      for (int64_t k = 0; k < in; ++k) acc += x[i * in + k] * w[o * in + k];
      y[i * out + o] = acc;
    }
  return y;
}

Vec RefCrossEntropy(const Vec& logits, int64_t n, int64_t c, const std::vector<int64_t>& labels,
                    double label_smoothing, int64_t ignore_index) {
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] == ignore_index) continue;
    double max = logits[i * c];
    for (int64_t j = 1; j < c; ++j) max = std::max(max, logits[i * c + j]);
    double z = 0.0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(logits[i * c + j] - max);
    const double log_z = max + std::log(z);
    // Target distribution (1 - s) * onehot + s / C, loss = -sum q log p.
    for (int64_t j = 0; j < c; ++j) {
      const double q = label_smoothing / static_cast<double>(c) + (j == labels[i] ? 1.0 - label_smoothing : 0.0);
      total -= q * (logits[i * c + j] - log_z);
    }
    ++counted;
  }
  return {counted ? total / static_cast<double>(counted) : std::numeric_limits<double>::quiet_NaN()};
}

}  // namespace ddp::testing
