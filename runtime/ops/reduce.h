// Whole-tensor reductions of f32 tensors, accumulated in double: what
// optimizers (gradient norms) and metrics need.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

double Sum(ExecutionContext& ctx, const Tensor& x);
double SumOfSquares(ExecutionContext& ctx, const Tensor& x);
// True when every element is finite (no inf, no NaN).
bool AllFinite(ExecutionContext& ctx, const Tensor& x);

}  // namespace ddp
