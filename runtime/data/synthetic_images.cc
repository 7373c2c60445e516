#include "runtime/data/synthetic_images.h"

#include <random>
#include <vector>

namespace ddp {
namespace {

// SplitMix64: a counter-based generator, so sample i needs no other sample.
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

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

void SyntheticImages::Fill(const int64_t* indices, int64_t count, Tensor& images, Tensor& labels) const {
  const int64_t sample_size = templates_.numel() / config_.num_classes;
  CHECK_EQ(images.numel(), count * sample_size) << "synthetic images " << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == count) << "synthetic labels " << labels.DebugString();
  const float scale = static_cast<float>(2.0 * config_.noise / 4294967296.0);
  const float shift = static_cast<float>(config_.noise);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < count; ++b) {
    const uint64_t key = Mix(config_.seed ^ Mix(static_cast<uint64_t>(indices[b])));
    const int64_t label = static_cast<int64_t>(key % static_cast<uint64_t>(config_.num_classes));
    labels.data<int64_t>()[b] = label;
    const float* tmpl = templates_.data<float>() + label * sample_size;
    float* out = images.data<float>() + b * sample_size;
    // Two 32-bit uniforms per 64-bit draw.
    for (int64_t i = 0; i < sample_size; i += 2) {
      const uint64_t r = Mix(key + static_cast<uint64_t>(i));
      out[i] = tmpl[i] + static_cast<float>(r & 0xffffffffu) * scale - shift;
      if (i + 1 < sample_size) out[i + 1] = tmpl[i + 1] + static_cast<float>(r >> 32) * scale - shift;
    }
  }
}

void SyntheticImages::FillRange(int64_t first_index, Tensor& images, Tensor& labels) const {
  std::vector<int64_t> indices(images.dim(0));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = first_index + static_cast<int64_t>(i);
  Fill(indices.data(), static_cast<int64_t>(indices.size()), images, labels);
}

}  // namespace ddp
