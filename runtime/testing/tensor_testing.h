// Helpers for op tests: random inputs exactly representable in f32,
// conversions between tensors and float64 vectors, and bitwise equality.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/tensor.h"

namespace ddp::testing {

// Uniform values in [lo, hi), rounded to float so the f32 op and the float64
// reference see identical inputs.
std::vector<double> RandomValues(int64_t n, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0);
// A host f32 tensor holding `values`.
Tensor ToF32Tensor(const std::vector<double>& values, const Shape& shape);
// Any host tensor's elements as doubles.
std::vector<double> ToDoubles(const Tensor& t);
// Copies for device tests.
inline Tensor OnCpu(const Tensor& t) { return t.To(Device::Cpu()); }
inline Tensor OnGpu(const Tensor& t, int device = 0) { return t.To(Device::Cuda(device)); }
// The same dtype and the same bytes, wherever each tensor lives.
bool SameBits(const Tensor& a, const Tensor& b);

}  // namespace ddp::testing
