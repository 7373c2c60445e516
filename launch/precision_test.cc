// The precision part: what it chooses and refuses, and the verdict on a
// step, with and without loss scaling.
#include "launch/precision.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ddp {
namespace {

std::unique_ptr<Precision> Choose(const std::string& precision, const std::string& format, bool gpu, bool images,
                                  LossScalerOptions::Mode mode = LossScalerOptions::Mode::kNone) {
  PrecisionOptions o;
  o.precision = precision;
  o.memory_format = format;
  o.gpu = gpu;
  o.images = images;
  o.loss_scale.mode = mode;
  o.loss_scale.initial_scale = 1024.0;
  StatusOr<std::unique_ptr<Precision>> p = Precision::Choose(o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(*p) : nullptr;
}

TEST(PrecisionTest, ChoosesDtypeAndMemoryFormat) {
  EXPECT_TRUE(Choose("fp32", "auto", false, true)->channels_last());   // CPU images
  EXPECT_FALSE(Choose("fp32", "auto", false, false)->channels_last());  // tokens
  EXPECT_FALSE(Choose("fp32", "auto", true, true)->channels_last());    // GPU f32
  EXPECT_TRUE(Choose("bf16", "auto", true, true)->channels_last());     // GPU 16-bit
  EXPECT_FALSE(Choose("fp16", "contiguous", true, true)->channels_last());
  EXPECT_EQ(Choose("bf16", "auto", true, true)->compute_dtype(), DType::kBF16);
  EXPECT_EQ(Choose("tf32", "auto", true, true)->compute_dtype(), DType::kF32);
}

TEST(PrecisionTest, Refusals) {
  PrecisionOptions o;
  o.precision = "fp16";
  EXPECT_EQ(Precision::Choose(o).status().message(), "--precision fp16 is for GPUs; on the CPU use --precision bf16");
  o.precision = "fp32";
  o.gpu = true;
  o.memory_format = "channels_last";
  EXPECT_EQ(Precision::Choose(o).status().message().rfind("--memory-format channels_last on GPUs needs --precision "
                                                          "fp16 or bf16",
                                                          0),
            0u);
}

TEST(PrecisionTest, WithoutLossScalingANonFiniteStepStopsEveryRank) {
  std::unique_ptr<Precision> p = Choose("fp32", "auto", false, true);
  auto name = [] { return std::string("layer1.0.conv1.weight"); };
  EXPECT_EQ(p->LossGradient(4), 0.25);
  StatusOr<bool> v = p->Verdict({3, 0, 1.5, false, false}, name);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(*v);
  v = p->Verdict({3, 1, 1.5, true, true}, name);
  EXPECT_EQ(v.status().message(),
            "non-finite gradient at step 3 on rank 1, first in 'layer1.0.conv1.weight'; stopping before the optimizer "
            "step touches the weights (look for NaN or Inf in the data, or lower --lr)");
  v = p->Verdict({3, 0, 1.5, true, false}, name);
  EXPECT_EQ(v.status().message(), "another rank found a non-finite gradient at step 3; stopping before the optimizer step");
  v = p->Verdict({4, 0, std::numeric_limits<double>::quiet_NaN(), false, false}, name);
  EXPECT_EQ(v.status().message(), "loss is nan at step 4; try a lower --lr");
}

TEST(PrecisionTest, UnderDynamicScalingANonFiniteStepIsSkippedAndTheScaleBacksOff) {
  std::unique_ptr<Precision> p = Choose("bf16", "auto", true, true, LossScalerOptions::Mode::kDynamic);
  bool asked = false;
  auto name = [&] {
    asked = true;
    return std::string("?");
  };
  EXPECT_EQ(p->LossGradient(2), 512.0);
  StatusOr<bool> v = p->Verdict({1, 0, 2.0, true, true}, name);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(*v);
  EXPECT_EQ(p->scaler().scale(), 512.0);
  v = p->Verdict({2, 0, std::numeric_limits<double>::infinity(), false, false}, name);  // an overflowing forward
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(*v);
  EXPECT_EQ(p->scaler().scale(), 256.0);
  v = p->Verdict({3, 0, 2.0, false, false}, name);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(*v);
  EXPECT_EQ(p->scaler().skipped_steps(), 2);
  EXPECT_FALSE(asked);  // a skip names nothing
}

TEST(PrecisionTest, UnscaleDividesByTheStepsScale) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Tensor g = Tensor::FromVector<float>({4.0f, -8.0f}, {2});
  Precision::Unscale(ctx, {g}, 4.0);
  EXPECT_EQ(g.data<float>()[0], 1.0f);
  EXPECT_EQ(g.data<float>()[1], -2.0f);
  Precision::Unscale(ctx, {g}, 1.0);
  EXPECT_EQ(g.data<float>()[0], 1.0f);
}

}  // namespace
}  // namespace ddp
