#include "runtime/synthetic_images.h"

#include <random>

namespace ddp {

SyntheticImages::SyntheticImages(const SyntheticImagesConfig& config) : config_(config) {
  const int64_t plane = config.image_size * config.image_size;
  templates_ = Tensor::Empty({config.num_classes, config.channels, config.image_size, config.image_size}, DType::kF32);
  std::mt19937_64 rng(config.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* t = templates_.data<float>();
  // A per-channel offset (what global pooling sees) plus a spatial pattern.
  for (int64_t k = 0; k < config.num_classes * config.channels; ++k) {
    const float offset = normal(rng);
    for (int64_t i = 0; i < plane; ++i) t[k * plane + i] = offset + 0.5f * normal(rng);
  }
}

void SyntheticImages::Fill(int64_t first_index, Tensor& images, Tensor& labels) const {
  const int64_t batch = images.dim(0);
  const int64_t sample_size = templates_.numel() / config_.num_classes;
  CHECK_EQ(images.numel(), batch * sample_size) << "synthetic images " << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == batch) << "synthetic labels " << labels.DebugString();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t index = first_index + b;
    // One generator per sample, seeded by (seed, index): any sample can be
    // produced alone, in any order, on any rank.
    std::mt19937_64 rng(config_.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index));
    const int64_t label = static_cast<int64_t>(rng() % static_cast<uint64_t>(config_.num_classes));
    labels.data<int64_t>()[b] = label;
    std::normal_distribution<float> noise(0.0f, static_cast<float>(config_.noise));
    const float* tmpl = templates_.data<float>() + label * sample_size;
    float* out = images.data<float>() + b * sample_size;
    for (int64_t i = 0; i < sample_size; ++i) out[i] = tmpl[i] + noise(rng);
  }
}

}  // namespace ddp
