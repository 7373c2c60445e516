#include "runtime/optim/loss_scaler.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

LossScaler Dynamic(int64_t interval) {
  LossScalerOptions options;
  options.mode = LossScalerOptions::Mode::kDynamic;
  options.growth_interval = interval;
  return LossScaler(options);
}

TEST(LossScalerTest, StartsAtTwoToTheSixteen) {
  LossScaler scaler = Dynamic(2000);
  EXPECT_TRUE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 65536.0);
}

TEST(LossScalerTest, DoublesAfterTheIntervalOfFiniteSteps) {
  LossScaler scaler = Dynamic(2000);
  for (int i = 0; i < 1999; ++i) ASSERT_FALSE(scaler.Update(false));
  EXPECT_EQ(scaler.scale(), 65536.0);  // one short of the interval
  EXPECT_EQ(scaler.growth_tracker(), 1999);
  EXPECT_FALSE(scaler.Update(false));
  EXPECT_EQ(scaler.scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  for (int i = 0; i < 2000; ++i) scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 262144.0);
}

TEST(LossScalerTest, OverflowHalvesSkipsAndRestartsTheCount) {
  LossScaler scaler = Dynamic(3);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  EXPECT_TRUE(scaler.Update(true));  // skipped
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  // Two finite steps no longer reach the interval: the count restarted.
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 32768.0);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 65536.0);
  // Back-to-back overflows halve each time.
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 16384.0);
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

TEST(LossScalerTest, GrowthStopsBeforeF32Overflows) {
  LossScalerOptions options;
  options.mode = LossScalerOptions::Mode::kDynamic;
  options.initial_scale = 0x1p127;  // the largest power of two in f32
  options.growth_interval = 1;
  LossScaler scaler(options);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 0x1p127);
  options.initial_scale = 0x1p126;
  LossScaler lower(options);
  lower.Update(false);
  EXPECT_EQ(lower.scale(), 0x1p127);
}

TEST(LossScalerTest, StaticScaleSkipsButNeverChanges) {
  StatusOr<LossScalerOptions> options = ParseLossScale("128");
  ASSERT_TRUE(options.ok());
  options->growth_interval = 1;
  LossScaler scaler(*options);
  EXPECT_EQ(scaler.scale(), 128.0);
  EXPECT_FALSE(scaler.Update(false));
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 128.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(LossScalerTest, NoneScalesByOneAndNeverSkips) {
  StatusOr<LossScalerOptions> options = ParseLossScale("none");
  ASSERT_TRUE(options.ok());
  LossScaler scaler(*options);
  EXPECT_FALSE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_FALSE(scaler.Update(true));
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(LossScalerTest, ParsesTheFlag) {
  EXPECT_EQ(ParseLossScale("dynamic")->mode, LossScalerOptions::Mode::kDynamic);
  EXPECT_EQ(ParseLossScale("1e39").status().message(), "--loss-scale 1e39 overflows f32, in which gradients are scaled");
  for (const char* bad : {"", "0", "-4", "inf", "nan", "12x", "auto"}) {
    const StatusOr<LossScalerOptions> parsed = ParseLossScale(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              "--loss-scale '" + std::string(bad) + "' is neither dynamic, none nor a positive number");
  }
}

}  // namespace
}  // namespace ddp
