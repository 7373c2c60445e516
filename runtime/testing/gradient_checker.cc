#include "runtime/testing/gradient_checker.h"

#include <cmath>
#include <sstream>

namespace ddp::testing {
namespace {

double WeightedSum(const std::vector<double>& out, const std::vector<double>& weights) {
  EXPECT_EQ(out.size(), weights.size()) << "reference output size vs output weights";
  double sum = 0.0;
  for (size_t k = 0; k < out.size() && k < weights.size(); ++k) sum += out[k] * weights[k];
  return sum;
}

}  // namespace

std::vector<double> NumericalGradient(const ReferenceFunction& f, std::vector<std::vector<double>> inputs,
                                      size_t input_index, const std::vector<double>& output_weights, double step) {
  std::vector<double>& x = inputs.at(input_index);
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double plus = WeightedSum(f(inputs), output_weights);
    x[i] = saved - step;
    const double minus = WeightedSum(f(inputs), output_weights);
    x[i] = saved;
    grad[i] = (plus - minus) / (2.0 * step);
  }
  return grad;
}

::testing::AssertionResult AllClose(const std::vector<double>& actual, const std::vector<double>& expected,
                                    double rtol, double atol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != expected size " << expected.size();
  }
  size_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double allowed = atol + rtol * std::fabs(expected[i]);
    const double error = std::fabs(actual[i] - expected[i]);
    const double ratio = std::isnan(error) ? INFINITY : error / allowed;
    if (ratio > 1.0) ++bad;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(10);
  os << bad << " of " << actual.size() << " elements differ; worst at " << worst << ": " << actual[worst]
     << " vs expected " << expected[worst] << " (rtol " << rtol << ", atol " << atol << ")";
  return ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult GradientChecker::Check(const ReferenceFunction& f,
                                                  const std::vector<std::vector<double>>& inputs,
                                                  const std::vector<double>& output_weights,
                                                  const std::vector<std::vector<double>>& analytic) const {
  if (analytic.size() != inputs.size()) {
    return ::testing::AssertionFailure() << analytic.size() << " analytic gradients for " << inputs.size()
                                         << " inputs";
  }
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (analytic[i].empty()) continue;
    any = true;
    const std::vector<double> numerical = NumericalGradient(f, inputs, i, output_weights, options_.step);
    ::testing::AssertionResult close = AllClose(analytic[i], numerical, options_.rtol, options_.atol);
    if (!close) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << close.message();
  }
  if (!any) return ::testing::AssertionFailure() << "no gradient was checked";
  return ::testing::AssertionSuccess();
}

}  // namespace ddp::testing
