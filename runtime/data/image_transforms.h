// ImageNet-style transforms, as torchvision applies them to PIL images:
//
// - training: RandomResizedCrop(size, scale, ratio 3/4..4/3), the crop box
//   drawn by torchvision's algorithm (ten tries, then a central crop),
//   resized with PIL's antialiased bilinear filter; RandomHorizontalFlip;
//   Normalize(ImageNet's mean and std);
// - evaluation: Resize(size * 256/224) of the short side, CenterCrop(size),
//   Normalize.
//
// Every random choice is a function of (seed, epoch, sample index): the
// same sample gets the same crop in an epoch whichever rank decodes it.
// The pixels differ from torchvision's only by PIL's 8-bit rounding between
// its two filter passes, and where a training crop large against `size` is
// decoded at a reduced DCT scale (image_decode.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/data/image_decode.h"
#include "runtime/data/sample_rng.h"

namespace ddp {

struct CropBox {
  int x = 0, y = 0, width = 0, height = 0;  // torchvision's j, i, w, h
};

// torchvision.transforms.RandomResizedCrop.get_params, its draws in its
// order (area, log-ratio, then row and column) from `rng`, which has
// Uniform() and Below(n) as SampleRng does.
template <typename Rng>
CropBox RandomResizedCropBox(int width, int height, double scale_min, double scale_max, double ratio_min,
                             double ratio_max, Rng& rng) {
  // Python's round() rounds halves to even, as nearbyint does by default.
  auto round = [](double v) { return static_cast<int>(std::nearbyint(v)); };
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (scale_min + rng.Uniform() * (scale_max - scale_min));
    const double aspect = std::exp(log_lo + rng.Uniform() * (log_hi - log_lo));
    const int w = round(std::sqrt(target * aspect));
    const int h = round(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      CropBox box;
      box.width = w;
      box.height = h;
      box.y = static_cast<int>(rng.Below(height - h + 1));
      box.x = static_cast<int>(rng.Below(width - w + 1));
      return box;
    }
  }
  // Ten misses: a central crop at the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / height;
  CropBox box;
  box.width = width;
  box.height = height;
  if (in_ratio < ratio_min) {
    box.height = round(width / ratio_min);
  } else if (in_ratio > ratio_max) {
    box.width = round(height * ratio_max);
  }
  box.y = (height - box.height) / 2;
  box.x = (width - box.width) / 2;
  return box;
}

// One axis of a resample: the image PIL would resize is pixels
// [crop_start, crop_start + crop_length) of the decoded image; it is
// resized to `out_length` pixels, of which [out_start, out_start + count)
// are kept.
struct AxisPlan {
  int crop_start = 0, crop_length = 0;
  int out_length = 0, out_start = 0, count = 0;
};

// What to decode and how to resample it, in full-size pixels.
struct ImagePlan {
  AxisPlan x, y;
  bool flip = false;
  PixelRegion decode;             // at least this region is decoded
  int min_width = 0, min_height = 0;  // the decode keeps the region this large (0: full scale)
};

struct AugmentOptions {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  bool hflip = true;
};

// Training: a random crop of `width` x `height` to size x size, flipped or
// not; decoded at a reduced scale while the crop stays >= size.
ImagePlan TrainPlan(int width, int height, int size, const AugmentOptions& options, SampleRng& rng);
// Evaluation: short side to round(size * 256 / 224), center size x size;
// full scale, only the rows and columns the kept pixels read.
ImagePlan EvalPlan(int width, int height, int size);

// Resamples `decoded` by `plan` (whose full-size coordinates map onto the
// decoded scale; the image's full size is width x height), flips, and
// writes (pixel / 255 - mean) / std into `chw` [3, count_y, count_x].
void ResampleNormalized(const DecodedRegion& decoded, const ImagePlan& plan, int width, int height, float* chw);

// ImageNet's per-channel mean and standard deviation (RGB).
inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

}  // namespace ddp
