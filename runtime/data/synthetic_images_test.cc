#include "runtime/data/synthetic_images.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(SyntheticImagesTest, SamplesDependOnlyOnSeedAndIndex) {
  SyntheticImagesConfig config;
  config.image_size = 8;
  SyntheticImages data(config);
  Tensor batch = Tensor::Empty({4, 3, 8, 8}, DType::kF32), labels = Tensor::Empty({4}, DType::kI64);
  data.FillRange(10, batch, labels);
  // Sample 12 alone, from another instance, equals the batch's third sample.
  SyntheticImages again(config);
  Tensor one = Tensor::Empty({1, 3, 8, 8}, DType::kF32), label = Tensor::Empty({1}, DType::kI64);
  const int64_t index = 12;
  again.Fill(&index, 1, /*epoch=*/0, one, label);
  EXPECT_EQ(label.data<int64_t>()[0], labels.data<int64_t>()[2]);
  EXPECT_EQ(std::memcmp(one.raw_data(), batch.View(2 * 192, {192}).raw_data(), 192 * sizeof(float)), 0);
  // Another seed gives other samples.
  config.seed = 2;
  SyntheticImages other(config);
  other.Fill(&index, 1, /*epoch=*/0, one, label);
  EXPECT_NE(std::memcmp(one.raw_data(), batch.View(2 * 192, {192}).raw_data(), 192 * sizeof(float)), 0);
}

TEST(SyntheticImagesTest, LabelsCoverEveryClassAndNoiseIsBounded) {
  SyntheticImagesConfig config;
  config.image_size = 2;
  config.noise = 0.5;
  SyntheticImages data(config);
  Tensor images = Tensor::Empty({200, 3, 2, 2}, DType::kF32), labels = Tensor::Empty({200}, DType::kI64);
  data.FillRange(0, images, labels);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 200; ++i) {
    const int64_t l = labels.data<int64_t>()[i];
    ASSERT_TRUE(l >= 0 && l < 10);
    ++counts[l];
  }
  for (int c : counts) EXPECT_GT(c, 5);
  // Two samples of one class differ by at most twice the noise bound.
  int a = 0, b = 1;
  while (labels.data<int64_t>()[b] != labels.data<int64_t>()[a]) ++b;
  for (int k = 0; k < 12; ++k) {
    EXPECT_LE(std::fabs(images.data<float>()[a * 12 + k] - images.data<float>()[b * 12 + k]), 1.0f + 1e-6f);
  }
}

}  // namespace
}  // namespace ddp
