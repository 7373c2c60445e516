#include "runtime/data/image_transforms.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <vector>


namespace ddp {
namespace {

// Python's round(): halves to even (the default rounding mode).
int RoundHalfEven(double v) { return static_cast<int>(std::nearbyint(v)); }

// PIL's bilinear ("triangle") filter, support 1.
double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's precompute_coeffs for one axis: an image of `in_size` pixels
// resized to `out_size`, outputs [out_start, out_start + count). For each,
// the first input pixel and its normalized weights (`taps` per output).
struct AxisCoefficients {
  int taps = 0;
  std::vector<int> first, length;
  std::vector<float> weights;  // [count, taps]
};

AxisCoefficients Coefficients(int in_size, int out_size, int out_start, int count) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  AxisCoefficients c;
  c.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(count);
  c.length.resize(count);
  c.weights.assign(static_cast<size_t>(count) * c.taps, 0.0f);
  std::vector<double> w(c.taps);
  for (int i = 0; i < count; ++i) {
    const double center = (out_start + i + 0.5) * scale;
    // PIL's (int) casts truncate toward zero.
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = std::max(hi - lo, 0);
    CHECK_LE(n, c.taps) << "resample taps";
    double total = 0.0;
    for (int k = 0; k < n; ++k) total += (w[k] = Triangle((k + lo - center + 0.5) / filterscale));
    for (int k = 0; k < n; ++k) c.weights[static_cast<size_t>(i) * c.taps + k] = static_cast<float>(total != 0.0 ? w[k] / total : 0.0);
    c.first[i] = lo;
    c.length[i] = n;
  }
  return c;
}

// The input pixels [lo, hi) that outputs [out_start, out_start + count) of
// a resize of `in_size` to `out_size` read.
std::pair<int, int> InputSpan(int in_size, int out_size, int out_start, int count) {
  const AxisCoefficients c = Coefficients(in_size, out_size, out_start, count);
  return {c.first.front(), c.first.back() + c.length.back()};
}

// An axis plan's crop in the pixels of an image decoded at 1/denom of its
// size, by the decoder's own rule (image_decode.cc): the crop's first pixel
// divided down, its end divided up, so it lies within what was decoded.
AxisPlan Scaled(const AxisPlan& a, int denom, int scaled) {
  if (denom == 1) return a;
  AxisPlan s = a;
  s.crop_start = std::min(a.crop_start / denom, scaled - 1);
  const int end = std::min((a.crop_start + a.crop_length + denom - 1) / denom, scaled);
  s.crop_length = std::max(end - s.crop_start, 1);
  return s;
}

}  // namespace

ImagePlan TrainPlan(int width, int height, int size, const AugmentOptions& options, SampleRng& rng) {
  const CropBox box = RandomResizedCropBox(width, height, options.scale_min, options.scale_max, options.ratio_min,
                                           options.ratio_max, rng);
  ImagePlan plan;
  plan.x = {box.x, box.width, size, 0, size};
  plan.y = {box.y, box.height, size, 0, size};
  // torchvision draws the flip after the crop, from its own generator call.
  plan.flip = options.hflip && rng.Uniform() < 0.5;
  plan.decode = {box.x, box.y, box.width, box.height};
  plan.min_width = plan.min_height = size;
  return plan;
}

ImagePlan EvalPlan(int width, int height, int size) {
  const int short_side = (size * 256 + 112) / 224;  // 256 for 224
  int out_w, out_h;
  if (width <= height) {
    out_w = short_side;
    out_h = static_cast<int>(static_cast<int64_t>(short_side) * height / width);
  } else {
    out_h = short_side;
    out_w = static_cast<int>(static_cast<int64_t>(short_side) * width / height);
  }
  const int left = RoundHalfEven((out_w - size) / 2.0), top = RoundHalfEven((out_h - size) / 2.0);
  ImagePlan plan;
  plan.x = {0, width, out_w, left, size};
  plan.y = {0, height, out_h, top, size};
  const auto [x0, x1] = InputSpan(width, out_w, left, size);
  const auto [y0, y1] = InputSpan(height, out_h, top, size);
  plan.decode = {x0, y0, x1 - x0, y1 - y0};
  return plan;
}

void ResampleNormalized(const DecodedRegion& decoded, const ImagePlan& plan, int width, int height, float* chw) {
  const int denom = static_cast<int>(std::lround(1.0 / decoded.scale));
  const AxisPlan ax = Scaled(plan.x, denom, decoded.scaled_width);
  const AxisPlan ay = Scaled(plan.y, denom, decoded.scaled_height);
  const AxisCoefficients cx = Coefficients(ax.crop_length, ax.out_length, ax.out_start, ax.count);
  const AxisCoefficients cy = Coefficients(ay.crop_length, ay.out_length, ay.out_start, ay.count);
  const int row_lo = cy.first.front(), row_hi = cy.first.back() + cy.length.back();
  const int nx = ax.count, ny = ay.count;
  const int dx = ax.crop_start - decoded.x, dy = ay.crop_start - decoded.y;
  CHECK(dx + cx.first.front() >= 0 && dx + cx.first.back() + cx.length.back() <= decoded.width &&
        dy + row_lo >= 0 && dy + row_hi <= decoded.height)
      << "resample reads outside the decoded region";
  // Horizontal pass over the rows the vertical pass reads.
  std::vector<float> rows(static_cast<size_t>(row_hi - row_lo) * nx * 3);
  for (int r = row_lo; r < row_hi; ++r) {
    const uint8_t* src = decoded.rgb.data() + (static_cast<size_t>(dy + r) * decoded.width + dx) * 3;
    float* dst = rows.data() + static_cast<size_t>(r - row_lo) * nx * 3;
    for (int i = 0; i < nx; ++i) {
      const float* w = cx.weights.data() + static_cast<size_t>(i) * cx.taps;
      const uint8_t* p = src + cx.first[i] * 3;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
      for (int k = 0; k < cx.length[i]; ++k) {
        s0 += w[k] * p[3 * k];
        s1 += w[k] * p[3 * k + 1];
        s2 += w[k] * p[3 * k + 2];
      }
      dst[3 * i] = s0;
      dst[3 * i + 1] = s1;
      dst[3 * i + 2] = s2;
    }
  }
  // Vertical pass, flip and normalization into the planes.
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * kImageNetStd[c]);
    shift[c] = -kImageNetMean[c] / kImageNetStd[c];
  }
  const size_t plane = static_cast<size_t>(nx) * ny;
  std::vector<float> line(static_cast<size_t>(nx) * 3);
  for (int j = 0; j < ny; ++j) {
    std::fill(line.begin(), line.end(), 0.0f);
    const float* w = cy.weights.data() + static_cast<size_t>(j) * cy.taps;
    for (int k = 0; k < cy.length[j]; ++k) {
      const float* src = rows.data() + static_cast<size_t>(cy.first[j] + k - row_lo) * nx * 3;
      for (int i = 0; i < nx * 3; ++i) line[i] += w[k] * src[i];
    }
    for (int i = 0; i < nx; ++i) {
      const int to = plan.flip ? nx - 1 - i : i;
      for (int c = 0; c < 3; ++c) chw[c * plane + static_cast<size_t>(j) * nx + to] = line[3 * i + c] * scale[c] + shift[c];
    }
  }
}

}  // namespace ddp
