// SyntheticImages made on the GPU equal the host's: labels exactly, images
// to f32 rounding (the same formulas, synthetic_sample.h; only the
// compilers' FMA contraction may differ). Reports SKIPPED without a GPU.
#include <cmath>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/data/synthetic_images.h"
#include "runtime/testing/gpu_testing.h"

namespace ddp {
namespace {

TEST(SyntheticImagesCudaTest, DeviceSamplesEqualHostSamples) {
  DDP_SKIP_WITHOUT_GPU();
  cuda::SetDevice(0);
  SyntheticImagesConfig config;
  config.channels = 3;
  config.image_size = 17;
  config.num_classes = 1000;
  config.seed = 42;
  const SyntheticImages data(config);
  ASSERT_TRUE(data.GeneratesOnDevice());
  const int64_t count = 9, first = 123456789;
  Tensor images = Tensor::Empty({count, 3, 17, 17}, DType::kF32), labels = Tensor::Empty({count}, DType::kI64);
  data.FillRange(first, images, labels);
  ExecutionContext gpu = ExecutionContext::Cuda(0, nullptr);
  Tensor gimages = Tensor::Empty(images.shape(), DType::kF32, Device::Cuda(0));
  Tensor glabels = Tensor::Empty(labels.shape(), DType::kI64, Device::Cuda(0));
  data.FillRangeOnDevice(gpu, first, gimages, glabels);
  const Tensor himages = gimages.To(Device::Cpu()), hlabels = glabels.To(Device::Cpu());
  for (int64_t b = 0; b < count; ++b) EXPECT_EQ(hlabels.data<int64_t>()[b], labels.data<int64_t>()[b]) << b;
  double worst = 0.0;
  for (int64_t i = 0; i < images.numel(); ++i) {
    worst = std::max(worst, std::fabs(double{himages.data<float>()[i]} - images.data<float>()[i]));
  }
  EXPECT_LE(worst, 1e-6);
}

}  // namespace
}  // namespace ddp
