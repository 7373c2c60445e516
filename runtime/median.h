// Medians of samples. Median: the middle value, or the mean of the two
// middle ones; 0 for an empty sample.
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

// The median of the known (>= 0) values; -1 without any.
inline double MedianOfKnown(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return v < 0.0; }), values.end());
  return values.empty() ? -1.0 : Median(std::move(values));
}

// The median of the known values, or 0 without any.
inline double MedianOfKnownOrZero(const std::vector<double>& values) {
  const double m = MedianOfKnown(values);
  return m < 0.0 ? 0.0 : m;
}

// The quarter point (25th percentile, the lower of two) of the known
// values; -1 without any.
inline double QuarterOfKnown(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return v < 0.0; }), values.end());
  if (values.empty()) return -1.0;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 4];
}

}  // namespace ddp
