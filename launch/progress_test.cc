#include "launch/progress.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(ProgressTest, DurationsReadAsTimesLeft) {
  EXPECT_EQ(FormatDuration(0.4), "0s");
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(362), "6m02s");
  EXPECT_EQ(FormatDuration(3 * 3600 + 4 * 60 + 5), "3h04m05s");
  EXPECT_EQ(FormatDuration(-5), "0s");
}

TEST(ProgressTest, ALogGetsEveryNthStepOrOneLineEveryTenSeconds) {
  ProgressPrinter every3(3, /*terminal=*/false);
  EXPECT_TRUE(every3.Due(1, 10, false, 0.0));   // the first
  EXPECT_FALSE(every3.Due(2, 10, false, 0.0));
  EXPECT_TRUE(every3.Due(3, 10, false, 0.0));
  EXPECT_TRUE(every3.Due(5, 10, true, 0.0));    // an evaluation's
  EXPECT_TRUE(every3.Due(10, 10, false, 0.0));  // the last
  ::testing::internal::CaptureStdout();
  ProgressPrinter timed(0, false);
  timed.Print("step 1", false, 100.0);
  EXPECT_FALSE(timed.Due(2, 100, false, 105.0));
  EXPECT_TRUE(timed.Due(3, 100, false, 110.5));
  timed.EndLine();  // nothing pending in a log
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "step 1\n");
}

TEST(ProgressTest, ATerminalRedrawsOneLineAndEndsItBeforeOtherOutput) {
  ProgressPrinter tty(0, /*terminal=*/true);
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(tty.Due(2, 100, false, 0.0));
  tty.Print("step 2", false, 0.0);
  tty.Print("step 3", false, 0.1);
  tty.EndLine();
  tty.EndLine();
  tty.Print("step 4 eval", true, 0.2);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "\r\033[2Kstep 2\r\033[2Kstep 3\n\r\033[2Kstep 4 eval\n");
}

}  // namespace
}  // namespace ddp
