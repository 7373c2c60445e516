// OpenMP implementation of runtime/ops/pooling.h; arguments are checked there.
#pragma once

#include "runtime/ops/pooling.h"

namespace ddp::cpu {

void MaxPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax);
void MaxPool2dBackward(ExecutionContext& ctx, const Tensor& dy, const Tensor& argmax, Tensor& dx);
void AvgPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y);
void AvgPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, Tensor& dx);
void GlobalAvgPoolForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void GlobalAvgPoolBackward(ExecutionContext& ctx, const Tensor& dy, Tensor& dx);

}  // namespace ddp::cpu
