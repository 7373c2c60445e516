// CUDA pooling: own kernels, the same semantics as cpu/pooling_cpu.h (window
// clipping, count_include_pad, argmax within the plane, NaN winning). Max
// and global average pooling take NCHW or channels-last; average pooling
// NCHW.
// Backward gathers for each input pixel from the windows that contain it, so
// it needs no atomics and is deterministic. Declared without CUDA types;
// defined only in builds with nvcc.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/pooling.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

void MaxPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax);
void MaxPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, const Tensor& argmax,
                       Tensor& dx);
void AvgPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y);
void AvgPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, Tensor& dx);
void GlobalAvgPoolForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void GlobalAvgPoolBackward(ExecutionContext& ctx, const Tensor& dy, Tensor& dx);

}  // namespace ddp::cuda
