// Pooling over NCHW tensors, as torch.nn.MaxPool2d, AvgPool2d and
// AdaptiveAvgPool2d(1) (floor mode).
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  // Average pooling only: padded zeros count in the divisor (PyTorch's default).
  bool count_include_pad = true;
};

Shape Pool2dOutputShape(const Shape& x, const Pool2dParams& p);

// y = max over each window; `argmax` (i32, shape of y) records the winning
// input index within its HxW plane for backward. Padding never wins.
void MaxPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax);
// dx (overwritten) receives each dy at its argmax; `p` is the forward's.
void MaxPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, const Tensor& argmax,
                       Tensor& dx);

void AvgPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y);
void AvgPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, Tensor& dx);

// [N, C, H, W] -> [N, C]: the mean of each plane.
void GlobalAvgPoolForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void GlobalAvgPoolBackward(ExecutionContext& ctx, const Tensor& dy, Tensor& dx);

}  // namespace ddp
