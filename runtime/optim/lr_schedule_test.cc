#include "runtime/optim/lr_schedule.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ddp {
namespace {

LrSchedule Make(LrSchedule::Kind kind) {
  LrSchedule s;
  s.kind = kind;
  s.base_lr = 0.4;
  s.warmup_steps = 4;
  s.total_steps = 104;
  return s;
}

TEST(LrScheduleTest, LinearWarmupThenEachDecay) {
  const LrSchedule c = Make(LrSchedule::Kind::kConstant);
  EXPECT_DOUBLE_EQ(c.At(0), 0.1);
  EXPECT_DOUBLE_EQ(c.At(3), 0.4);
  EXPECT_DOUBLE_EQ(c.At(50), 0.4);
  const LrSchedule cos = Make(LrSchedule::Kind::kCosine);
  EXPECT_DOUBLE_EQ(cos.At(1), 0.2);
  EXPECT_DOUBLE_EQ(cos.At(4), 0.4);
  EXPECT_NEAR(cos.At(54), 0.2, 1e-12);
  EXPECT_NEAR(cos.At(104), 0.0, 1e-12);
  LrSchedule step = Make(LrSchedule::Kind::kStep);
  step.step_size = 30;
  EXPECT_DOUBLE_EQ(step.At(33), 0.4);
  EXPECT_NEAR(step.At(34), 0.04, 1e-12);
  EXPECT_NEAR(step.At(94), 0.0004, 1e-12);
  const LrSchedule poly = Make(LrSchedule::Kind::kPoly);
  EXPECT_NEAR(poly.At(54), 0.4 * 0.25, 1e-12);
  EXPECT_NEAR(poly.At(104), 0.0, 1e-12);
  // Linear: 1 - t / T after warmup (T = 100 here), as Hugging Face's.
  const LrSchedule linear = Make(LrSchedule::Kind::kLinear);
  EXPECT_DOUBLE_EQ(linear.At(4), 0.4);
  EXPECT_NEAR(linear.At(29), 0.4 * 0.75, 1e-12);
  EXPECT_NEAR(linear.At(54), 0.4 * 0.5, 1e-12);
  EXPECT_NEAR(linear.At(104), 0.0, 1e-12);
}

TEST(LrScheduleTest, ParseNamesTheFlag) {
  EXPECT_EQ(*ParseLrScheduleKind("cosine"), LrSchedule::Kind::kCosine);
  StatusOr<LrSchedule::Kind> bad = ParseLrScheduleKind("exponential");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--lr-schedule 'exponential' is unknown; use constant, cosine, step, poly or linear");
  EXPECT_EQ(*ParseLrScheduleKind("linear"), LrSchedule::Kind::kLinear);
}

}  // namespace
}  // namespace ddp
