// A small ResNet learns a small generated image set: at least 95% top-1 on
// held-out samples, through the real trainer (tensors: files, eval, SGD with
// momentum, cosine schedule with warmup, label smoothing, clipping), in f32
// and in bf16 mixed precision with dynamic loss scaling (gradients unscaled
// before clipping).
#include <cstdlib>

#include <gtest/gtest.h>

#include "launch/trainer.h"
#include "runtime/ops/conv2d.h"
#include "runtime/data/synthetic_images.h"
#include "runtime/safetensors.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string WriteSet(const std::string& name, int64_t first, int64_t count) {
  SyntheticImagesConfig config;
  config.image_size = 32;
  config.num_classes = 4;
  config.noise = 1.5;
  config.seed = 11;
  SyntheticImages data(config);
  Tensor images = Tensor::Empty({count, 3, 32, 32}, DType::kF32), labels = Tensor::Empty({count}, DType::kI64);
  data.FillRange(first, images, labels);
  const std::string path = testing::TempPath(name);
  CHECK(WriteSafetensors(path, {{"images", images}, {"labels", labels}}).ok());
  return path;
}

class ConvergenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvergenceTest, ResNet18ReachesNinetyFivePercentOnHeldOutImages) {
  const std::string precision = GetParam();
  if (precision == "bf16" && !CpuHasFastBf16()) GTEST_SKIP() << "this CPU lacks AVX-512 BF16: bf16 trains in f32";
  TrainOptions o;
  o.precision = precision;
  if (precision == "bf16") o.loss_scale.mode = LossScalerOptions::Mode::kDynamic;
  o.model = "resnet18";
  o.batch_size = 16;
  o.epochs = 4;  // 256 samples: 16 steps an epoch
  o.threads = 2;
  o.optimizer = "sgd";
  o.lr = o.schedule.base_lr = 0.05;
  o.schedule.kind = LrSchedule::Kind::kCosine;
  o.schedule.warmup_steps = 4;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  o.label_smoothing = 0.1;
  o.clip_grad_norm = 5.0;
  o.data = "tensors:" + WriteSet("train.safetensors", 0, 256);
  o.eval_data = "tensors:" + WriteSet("eval.safetensors", 1000000, 200);
  o.image_size = 32;
  o.num_classes = 4;
  o.zero_init_residual = true;
  StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  StatusOr<TrainResult> result = (*trainer)->Run();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->compute_dtype, precision == "bf16" ? DType::kBF16 : DType::kF32);
  EXPECT_EQ(result->skipped_steps, 0);  // bf16 has f32's range: a scale of 2^16 never overflows here
  EXPECT_GE(result->eval_accuracy, 0.95);
  EXPECT_LT(result->final_loss, 0.6);  // label smoothing 0.1 over 4 classes floors it near 0.2
}

INSTANTIATE_TEST_SUITE_P(Precisions, ConvergenceTest, ::testing::Values("fp32", "bf16"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ddp
