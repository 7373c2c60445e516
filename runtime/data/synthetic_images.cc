#include "runtime/data/synthetic_images.h"

#include <random>
#include <vector>

#include "runtime/random.h"

namespace ddp {

SyntheticImages::SyntheticImages(const SyntheticImagesConfig& config) : config_(config) {
  std::mt19937_64 rng(config.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  offsets_.resize(config.num_classes * config.channels);
  for (float& o : offsets_) o = normal(rng);
}

void SyntheticImages::Fill(const int64_t* indices, int64_t count, Tensor& images, Tensor& labels) const {
  const int64_t plane = config_.image_size * config_.image_size;
  const int64_t sample_size = config_.channels * plane;
  CHECK_EQ(images.numel(), count * sample_size) << "synthetic images " << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == count) << "synthetic labels " << labels.DebugString();
  // Uniform in [-a, a) from 32 random bits: a = noise for the noise, and
  // sqrt(3)/2 for the pattern (standard deviation 0.5).
  const float to_unit = static_cast<float>(2.0 / 4294967296.0);
  const float noise = static_cast<float>(config_.noise);
  const float pattern = 0.8660254f;
  const uint64_t class_salt = SplitMix64(config_.seed ^ 0x5bd1e995ull);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < count; ++b) {
    const uint64_t key = SplitMix64(config_.seed ^ SplitMix64(static_cast<uint64_t>(indices[b])));
    const int64_t label = static_cast<int64_t>(key % static_cast<uint64_t>(config_.num_classes));
    labels.data<int64_t>()[b] = label;
    const uint64_t class_key = SplitMix64(class_salt + static_cast<uint64_t>(label));
    float* out = images.data<float>() + b * sample_size;
    for (int64_t ch = 0; ch < config_.channels; ++ch) {
      const float offset = offsets_[label * config_.channels + ch];
      for (int64_t i = 0; i < plane; ++i) {
        const int64_t k = ch * plane + i;
        const uint64_t t = SplitMix64(class_key + static_cast<uint64_t>(k));
        const uint64_t r = SplitMix64(key + static_cast<uint64_t>(k));
        const float u_pattern = static_cast<float>(t >> 32) * to_unit - 1.0f;
        const float u_noise = static_cast<float>(r >> 32) * to_unit - 1.0f;
        out[k] = offset + pattern * u_pattern + noise * u_noise;
      }
    }
  }
}

void SyntheticImages::FillRange(int64_t first_index, Tensor& images, Tensor& labels) const {
  std::vector<int64_t> indices(images.dim(0));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = first_index + static_cast<int64_t>(i);
  Fill(indices.data(), static_cast<int64_t>(indices.size()), images, labels);
}

}  // namespace ddp
