// The golden files of the tests against PyTorch (tests/golden/, written by
// tests/golden/make_*_golden.py through tests/golden/golden_io.py's write_golden).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/tensor.h"

namespace ddp::testing {

// tests/golden/NAME, parsed, from the test's working directory (the
// runfiles root; list the file in the test's data). The test program stops
// when it is missing.
nlohmann::json ReadGolden(const std::string& name);

// Expects the f32 tensor `value`'s sum of absolute values and sum of
// squares (both in double) within 1e-5 relative of `sums`' "abs_sum" and
// "square_sum": a golden "parameters_after" entry; `name` labels a failure.
void ExpectParameterSums(const Tensor& value, const nlohmann::json& sums, const std::string& name);

}  // namespace ddp::testing
