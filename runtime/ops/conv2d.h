// 2-D convolution over NCHW tensors, as torch.nn.functional.conv2d: weights
// [out_channels, in_channels / groups, kh, kw], optional bias [out_channels].
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// Whether this CPU runs bf16 convolutions and GEMMs natively (AVX-512 BF16
// or AMX), so that --precision bf16 is faster than f32 here.
bool CpuHasFastBf16();

// Output shape [N, out_channels, OH, OW] for input `x` and weights `w`;
// CHECK-fails on inconsistent shapes.
Shape Conv2dOutputShape(const Shape& x, const Shape& w, const Conv2dParams& p);

// y = conv(x, w) + bias. `bias` may be null; `y` must have the output shape.
void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor* bias, Tensor& y);
// dx = gradient with respect to the input, given dy.
void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                        Tensor& dx);
// dw (and dbias, if not null) = gradients with respect to weights and bias.
void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                           Tensor& dw, Tensor* dbias);

}  // namespace ddp
