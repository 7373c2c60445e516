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

// The meta device's plan of each for a CPU rank: the same primitives
// chosen, and the scratch their layout reorders would take reserved in
// `ctx` (a meta context), with nothing run.
void PlanConv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, bool bias);
void PlanConv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& w, const Tensor& dx);
void PlanConv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dw,
                               bool bias);

}  // namespace ddp::cpu
