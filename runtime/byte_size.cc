#include "runtime/byte_size.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ddp {

StatusOr<int64_t> ParseByteSize(const std::string& what, const std::string& text, bool allow_zero) {
  const std::string bad = what + " '" + text + "' is not a size; write e.g. 24GiB, 512MiB or 2000000000";
  if (text.empty()) return InvalidArgument(bad);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value)) return InvalidArgument(bad);
  struct Unit {
    const char* suffix;
    double scale;
  };
  static const Unit kUnits[] = {{"", 1.0},          {"B", 1.0},          {"K", 0x1p10},       {"KiB", 0x1p10},
                                {"M", 0x1p20},      {"MiB", 0x1p20},     {"G", 0x1p30},       {"GiB", 0x1p30},
                                {"T", 0x1p40},      {"TiB", 0x1p40},     {"kB", 1e3},         {"KB", 1e3},
                                {"MB", 1e6},        {"GB", 1e9},         {"TB", 1e12}};
  const std::string suffix = end;
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    const double bytes = std::floor(value * unit.scale);
    if (!(bytes >= (allow_zero ? 0.0 : 1.0)) || bytes > 0x1p62) {
      return InvalidArgument(what + " '" + text + "' must be at least " + (allow_zero ? "0 bytes" : "1 byte") +
                             " and at most 4 EiB");
    }
    return static_cast<int64_t>(bytes);
  }
  return InvalidArgument(bad);
}

std::string FormatBytes(int64_t bytes) {
  static const char* kNames[] = {"KiB", "MiB", "GiB", "TiB"};
  char text[48];
  if (bytes < 1024) {
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
    return text;
  }
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  std::snprintf(text, sizeof(text), "%.1f %s", value, kNames[unit]);
  return text;
}

}  // namespace ddp
