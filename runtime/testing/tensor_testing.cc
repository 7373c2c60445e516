#include "runtime/testing/tensor_testing.h"

#include <cstring>

namespace ddp::testing {

std::vector<double> RandomValues(int64_t n, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(dist(rng));
  return v;
}

Tensor ToF32Tensor(const std::vector<double>& values, const Shape& shape) {
  CHECK_EQ(static_cast<int64_t>(values.size()), NumElements(shape));
  Tensor t = Tensor::Empty(shape, DType::kF32);
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
  return t;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetAsDouble(i);
  return v;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  const Tensor ha = OnCpu(a), hb = OnCpu(b);
  return ha.dtype() == hb.dtype() && ha.nbytes() == hb.nbytes() &&
         std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

}  // namespace ddp::testing
