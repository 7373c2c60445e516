#include "tests/golden.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/status.h"

namespace ddp::testing {

nlohmann::json ReadGolden(const std::string& name) {
  const std::string path = "tests/golden/" + name;
  std::ifstream in(path);
  CHECK(in) << path << " missing";
  return nlohmann::json::parse(in);
}

void ExpectParameterSums(const Tensor& value, const nlohmann::json& sums, const std::string& name) {
  double abs_sum = 0.0, square_sum = 0.0;
  for (int64_t i = 0; i < value.numel(); ++i) {
    const double v = value.data<float>()[i];
    abs_sum += std::fabs(v);
    square_sum += v * v;
  }
  const double want_abs = sums["abs_sum"].get<double>(), want_square = sums["square_sum"].get<double>();
  EXPECT_NEAR(abs_sum, want_abs, 1e-5 * want_abs) << name;
  EXPECT_NEAR(square_sum, want_square, 1e-5 * want_square) << name;
}

}  // namespace ddp::testing
