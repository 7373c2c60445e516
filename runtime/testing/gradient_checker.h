// Finite-difference gradient checking in float64, reusable by every op test
// (CPU now; BERT and CUDA ops later).
//
// An op is described by an independent float64 reference of its forward pass:
// a function of several flat inputs returning a flat output. The checker
// forms the scalar L = sum_k out_k * w_k for fixed random weights w (the
// output gradient fed to the op's backward), takes central differences of L
// with respect to every element of the chosen inputs, and compares them with
// the gradients the shipped backward produced.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ddp::testing {

using ReferenceFunction = std::function<std::vector<double>(const std::vector<std::vector<double>>& inputs)>;

struct GradientCheckOptions {
  double step = 1e-6;  // central-difference step in float64
  // An element passes when |analytic - numerical| <= atol + rtol * |numerical|.
  double rtol = 2e-4;
  double atol = 2e-5;
};

// d(sum_k f(inputs)_k * output_weights_k) / d inputs[input_index], by
// central differences.
std::vector<double> NumericalGradient(const ReferenceFunction& f, std::vector<std::vector<double>> inputs,
                                      size_t input_index, const std::vector<double>& output_weights, double step);

// Elementwise closeness with the worst offender in the failure message.
::testing::AssertionResult AllClose(const std::vector<double>& actual, const std::vector<double>& expected,
                                    double rtol, double atol);

class GradientChecker {
 public:
  explicit GradientChecker(GradientCheckOptions options = {}) : options_(options) {}

  // `analytic[i]` is the gradient the op's backward computed for inputs[i];
  // an empty vector skips that input (labels, say).
  ::testing::AssertionResult Check(const ReferenceFunction& f, const std::vector<std::vector<double>>& inputs,
                                   const std::vector<double>& output_weights,
                                   const std::vector<std::vector<double>>& analytic) const;

 private:
  GradientCheckOptions options_;
};

}  // namespace ddp::testing
