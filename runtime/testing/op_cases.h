// The shapes the op tests run on, written once: the CPU tests check them
// against float64 references, and the CUDA tests run the very same cases
// against the CPU ops.
#pragma once

#include <ostream>
#include <vector>

#include "runtime/ops/conv2d.h"
#include "runtime/ops/pooling.h"

namespace ddp::testing {

Conv2dParams ConvParams(int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1);
Pool2dParams PoolParams(int64_t kernel, int64_t stride, int64_t pad, bool count_include_pad = true);

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dParams p;
  bool bias;
};
inline void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }
// Strides, padding, dilation, groups (depthwise too), 1x1 and 7x7, an
// asymmetric case and odd sizes.
std::vector<ConvCase> ConvCases();

struct PoolCase {
  const char* name;
  Shape x;
  Pool2dParams p;
};
inline void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }
std::vector<PoolCase> PoolCases();

}  // namespace ddp::testing
