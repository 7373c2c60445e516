// oneDNN implementation of runtime/ops/conv2d.h; shapes are checked there.
#pragma once

#include "runtime/ops/conv2d.h"

namespace ddp::cpu {

void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor* bias, Tensor& y);
void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                        Tensor& dx);
void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                           Tensor& dw, Tensor* dbias);

}  // namespace ddp::cpu
