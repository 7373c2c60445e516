#include "runtime/data/synthetic_images.h"

#include <random>
#include <vector>

#include "runtime/data/synthetic_images_cuda.h"
#include "runtime/data/synthetic_sample.h"

namespace ddp {

SyntheticImages::SyntheticImages(const SyntheticImagesConfig& config) : config_(config) {
  std::mt19937_64 rng(config.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  offsets_.resize(config.num_classes * config.channels);
  for (float& o : offsets_) o = normal(rng);
}

int64_t SyntheticImages::Fill(const int64_t* indices, int64_t count, int64_t, Tensor& images, Tensor& labels) const {
  const int64_t plane = config_.image_size * config_.image_size;
  const int64_t sample_size = config_.channels * plane;
  CHECK_EQ(images.numel(), count * sample_size) << "synthetic images " << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == count) << "synthetic labels " << labels.DebugString();
  const float noise = static_cast<float>(config_.noise);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < count; ++b) {
    const uint64_t key = synthetic::SampleKey(config_.seed, indices[b]);
    const int64_t label = synthetic::Label(key, config_.num_classes);
    labels.data<int64_t>()[b] = label;
    const uint64_t class_key = synthetic::ClassKey(config_.seed, label);
    float* out = images.data<float>() + b * sample_size;
    for (int64_t ch = 0; ch < config_.channels; ++ch) {
      const float offset = offsets_[label * config_.channels + ch];
      for (int64_t i = 0; i < plane; ++i) {
        const int64_t k = ch * plane + i;
        out[k] = synthetic::Value(key, class_key, k, offset, noise);
      }
    }
  }
  return 0;
}

void SyntheticImages::FillRange(int64_t first_index, Tensor& images, Tensor& labels) const {
  std::vector<int64_t> indices(images.dim(0));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = first_index + static_cast<int64_t>(i);
  Fill(indices.data(), static_cast<int64_t>(indices.size()), /*epoch=*/0, images, labels);
}

// A GPU makes them in place. A CPU-only build never trains on one, but its
// memory plans for a GPU count the input as a CUDA build holds it.
bool SyntheticImages::GeneratesOnDevice() const { return true; }

void SyntheticImages::FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Tensor& images, Tensor& labels) const {
  const int64_t count = images.dim(0);
  CHECK(images.dtype() == DType::kF32 && images.numel() == count * config_.channels * config_.image_size *
                                                                  config_.image_size)
      << "synthetic images " << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == count) << "synthetic labels " << labels.DebugString();
  CHECK(images.device() == ctx.device() && labels.device() == ctx.device() && ctx.device().is_cuda())
      << "FillRangeOnDevice on " << ctx.device().ToString();
  if (!device_offsets_.defined() || device_offsets_.device() != ctx.device()) {
    const Tensor host = Tensor::FromVector<float>(offsets_, {static_cast<int64_t>(offsets_.size())});
    device_offsets_ = host.To(ctx.device());
  }
#ifdef DDP_HAVE_CUDA
  cuda_synthetic::Fill(ctx, config_.seed, config_.channels, config_.image_size * config_.image_size,
                       config_.num_classes, static_cast<float>(config_.noise), device_offsets_.data<float>(), first,
                       count, images.data<float>(), labels.data<int64_t>());
#else
  LOG(FATAL) << "FillRangeOnDevice: this binary was built without CUDA";
#endif
}

}  // namespace ddp
