#include "runtime/testing/gradient_checker.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ddp::testing {
namespace {

// f(x, y) = [x0^2 * y0, sin(x1) + y0 * y1]
std::vector<double> F(const std::vector<std::vector<double>>& in) {
  const auto& x = in[0];
  const auto& y = in[1];
  return {x[0] * x[0] * y[0], std::sin(x[1]) + y[0] * y[1]};
}

TEST(GradientCheckerTest, NumericalGradientOfKnownFunction) {
  const std::vector<std::vector<double>> in = {{1.5, 0.3}, {-2.0, 0.7}};
  const std::vector<double> w = {0.5, -1.25};
  // dL/dx = [w0 * 2 x0 y0, w1 cos(x1)], dL/dy = [w0 x0^2 + w1 y1, w1 y0].
  const std::vector<double> dx = NumericalGradient(F, in, 0, w, 1e-6);
  EXPECT_NEAR(dx[0], 0.5 * 2 * 1.5 * -2.0, 1e-8);
  EXPECT_NEAR(dx[1], -1.25 * std::cos(0.3), 1e-8);
  const std::vector<double> dy = NumericalGradient(F, in, 1, w, 1e-6);
  EXPECT_NEAR(dy[0], 0.5 * 1.5 * 1.5 + -1.25 * 0.7, 1e-8);
  EXPECT_NEAR(dy[1], -1.25 * -2.0, 1e-8);
}

TEST(GradientCheckerTest, AcceptsCorrectAndRejectsWrongGradients) {
  const std::vector<std::vector<double>> in = {{1.5, 0.3}, {-2.0, 0.7}};
  const std::vector<double> w = {0.5, -1.25};
  const std::vector<double> dx = {0.5 * 2 * 1.5 * -2.0, -1.25 * std::cos(0.3)};
  const std::vector<double> dy = {0.5 * 1.5 * 1.5 + -1.25 * 0.7, -1.25 * -2.0};
  GradientChecker checker;
  EXPECT_TRUE(checker.Check(F, in, w, {dx, dy}));
  EXPECT_TRUE(checker.Check(F, in, w, {dx, {}}));
  // A 1% error in one element is caught, and the message names it.
  std::vector<double> wrong = dy;
  wrong[1] *= 1.01;
  ::testing::AssertionResult result = checker.Check(F, in, w, {dx, wrong});
  EXPECT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("gradient of input 1"), std::string::npos) << result.message();
  // Checking nothing is a failure, not a vacuous pass.
  EXPECT_FALSE(checker.Check(F, in, w, {{}, {}}));
}

TEST(GradientCheckerTest, AllCloseReportsWorstElement) {
  EXPECT_TRUE(AllClose({1.0, 2.0}, {1.0, 2.0 + 1e-9}, 1e-6, 0.0));
  ::testing::AssertionResult r = AllClose({1.0, 2.0, 3.0}, {1.0, 2.5, 3.0}, 1e-6, 1e-6);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("worst at 1"), std::string::npos) << r.message();
  EXPECT_FALSE(AllClose({NAN}, {1.0}, 1e-3, 1e-3));
  EXPECT_FALSE(AllClose({1.0}, {1.0, 2.0}, 1e-3, 1e-3));
}

}  // namespace
}  // namespace ddp::testing
