#include "runtime/testing/op_cases.h"

namespace ddp::testing {

Conv2dParams ConvParams(int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

Pool2dParams PoolParams(int64_t kernel, int64_t stride, int64_t pad, bool count_include_pad) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = kernel;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = count_include_pad;
  return p;
}

std::vector<ConvCase> ConvCases() {
  Conv2dParams asymmetric = ConvParams(1, 0);
  asymmetric.stride_h = 2;
  asymmetric.pad_w = 2;
  asymmetric.dilation_w = 2;
  const auto P = [](int64_t s, int64_t pad, int64_t d = 1, int64_t g = 1) { return ConvParams(s, pad, d, g); };
  return {{"3x3_same", {2, 3, 7, 6}, {4, 3, 3, 3}, P(1, 1), false},
          {"3x3_stride2_unreached_rows", {2, 3, 8, 8}, {5, 3, 3, 3}, P(2, 0), true},
          {"dilated", {1, 2, 9, 9}, {3, 2, 3, 3}, P(1, 2, 2), false},
          {"grouped", {2, 4, 6, 5}, {6, 2, 3, 3}, P(1, 1, 1, 2), true},
          {"depthwise", {1, 4, 6, 6}, {4, 1, 3, 3}, P(2, 1, 1, 4), false},
          {"pointwise_stride2", {2, 8, 6, 6}, {4, 8, 1, 1}, P(2, 0), false},
          {"stem_7x7", {1, 3, 12, 11}, {4, 3, 7, 7}, P(2, 3), false},
          {"asymmetric", {1, 3, 9, 7}, {2, 3, 3, 2}, asymmetric, true},
          {"blocked_channels", {2, 32, 5, 5}, {16, 32, 3, 3}, P(1, 1), false}};
}

std::vector<PoolCase> PoolCases() {
  return {{"resnet_stem_3x3_s2_p1", {2, 3, 9, 9}, PoolParams(3, 2, 1)},
          {"2x2_s2", {1, 4, 6, 7}, PoolParams(2, 2, 0)},
          {"3x3_s1_p1", {2, 2, 5, 4}, PoolParams(3, 1, 1)},
          {"3x3_s2_uneven", {1, 2, 8, 10}, PoolParams(3, 2, 0)}};
}

}  // namespace ddp::testing
