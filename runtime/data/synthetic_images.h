// A learnable synthetic image set: each class has a fixed random template
// (seeded): a per-channel offset plus a spatial pattern, computed on demand
// from a hash so no template is stored. Each sample is its class's template
// plus uniform noise.
// Deterministic in (seed, sample index), so every rank and every run sees the
// same samples, in any order.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/data/image_dataset.h"

namespace ddp {

struct SyntheticImagesConfig {
  int64_t channels = 3;
  int64_t image_size = 32;
  int64_t num_classes = 10;
  double noise = 1.0;  // half-width of the uniform noise; templates have unit scale
  uint64_t seed = 1;
};

class SyntheticImages : public ImageDataset {
 public:
  explicit SyntheticImages(const SyntheticImagesConfig& config);

  int64_t size() const override { return kEndless; }
  int64_t channels() const override { return config_.channels; }
  int64_t image_size() const override { return config_.image_size; }
  int64_t num_classes() const override { return config_.num_classes; }
  int64_t Fill(const int64_t* indices, int64_t count, int64_t epoch, Tensor& images, Tensor& labels) const override;
  // Samples first_index, first_index + 1, ...
  void FillRange(int64_t first_index, Tensor& images, Tensor& labels) const;
  // The same samples made by a CUDA kernel (synthetic_images_cuda.h) into
  // device tensors: equal to Fill's up to f32 rounding, labels exactly.
  bool GeneratesOnDevice() const override;
  void FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Tensor& images, Tensor& labels) const override;

 private:
  SyntheticImagesConfig config_;
  std::vector<float> offsets_;  // [num_classes, C]
  mutable Tensor device_offsets_;  // offsets_ on the device, copied at first use
};

}  // namespace ddp
