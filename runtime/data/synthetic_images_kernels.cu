#include "runtime/data/synthetic_images_cuda.h"
#include "runtime/data/synthetic_sample.h"
#include "runtime/ops/cuda/kernel_util.cuh"

namespace ddp::cuda_synthetic {
namespace {

__global__ void SyntheticImagesKernel(uint64_t seed, int64_t channels, int64_t plane, int64_t num_classes,
                                      float noise, const float* offsets, int64_t first, int64_t count, float* images,
                                      int64_t* labels) {
  const int64_t sample_size = channels * plane;
  DDP_GRID_STRIDE(i, count * sample_size) {
    const int64_t b = i / sample_size, k = i % sample_size;
    const uint64_t key = synthetic::SampleKey(seed, first + b);
    const int64_t label = synthetic::Label(key, num_classes);
    if (k == 0) labels[b] = label;
    const float offset = offsets[label * channels + k / plane];
    images[i] = synthetic::Value(key, synthetic::ClassKey(seed, label), k, offset, noise);
  }
}

}  // namespace

void Fill(ExecutionContext& ctx, uint64_t seed, int64_t channels, int64_t plane, int64_t num_classes, float noise,
          const float* offsets, int64_t first, int64_t count, float* images, int64_t* labels) {
  const int64_t n = count * channels * plane;
  if (n == 0) return;
  SyntheticImagesKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, cuda::StreamOf(ctx)>>>(
      seed, channels, plane, num_classes, noise, offsets, first, count, images, labels);
  DDP_CHECK_LAUNCH("SyntheticImagesKernel");
}

}  // namespace ddp::cuda_synthetic
