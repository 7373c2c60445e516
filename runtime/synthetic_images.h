// A learnable synthetic image-classification set: each class has a fixed
// random template (seeded), and each sample is its class's template plus
// Gaussian noise. Deterministic in (seed, sample index), so every rank and
// every run sees the same samples.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace ddp {

struct SyntheticImagesConfig {
  int64_t channels = 3;
  int64_t image_size = 32;
  int64_t num_classes = 10;
  double noise = 1.0;  // noise standard deviation; templates have unit scale
  uint64_t seed = 1;
};

class SyntheticImages {
 public:
  explicit SyntheticImages(const SyntheticImagesConfig& config);

  // Fills images [B, C, H, W] (f32) and labels [B] (i64) with samples
  // first_index .. first_index + B - 1.
  void Fill(int64_t first_index, Tensor& images, Tensor& labels) const;
  const SyntheticImagesConfig& config() const { return config_; }

 private:
  SyntheticImagesConfig config_;
  Tensor templates_;  // [num_classes, C, H, W]
};

}  // namespace ddp
