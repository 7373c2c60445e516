// The median of a sample: the middle value, or the mean of the two middle
// ones; 0 for an empty sample.
#pragma once

#include <algorithm>
#include <vector>

namespace ddp {

inline double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace ddp
