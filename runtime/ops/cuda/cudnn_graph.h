// 16-bit convolutions through cuDNN's backend (graph) API: one operation
// graph per convolution shape, its engine configurations from heuristics
// mode A, each finalized into an execution plan, and the plan to run chosen
// once and cached, by timing up to eight of them on the call's own buffers
// (as cudnnFind does), or, with ctx.deterministic(), as the heuristics'
// first plan without the nondeterministic note.
//
// Why beside the legacy API (cudnn_ops.cu): on an H200 with cuDNN 9.19 the
// legacy API offers bf16 channels-last data only generic kernels for the
// backward passes (dgrad2d_grouped_direct_kernel, wgrad_alg1_engine_NHWC,
// with NCHW/NHWC transposes around them): ResNet-50 trained at 57 images/s
// in bf16 against 886 in fp32. The backend API reaches the tensor-core
// implicit-GEMM engines PyTorch uses. fp32 stays on the legacy API, whose
// FMA-only and TF32 choices are explicit there.
//
// DDP_CUDNN_API=legacy sends 16-bit convolutions back to the legacy API
// (a comparison, or a way around an engine that misbehaves).
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/conv2d.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

enum class ConvKind { kForward, kBackwardData, kBackwardFilter };

// The three tensors of one convolution direction, in cuDNN's roles: x and w
// are the forward's input and filter (dx and dw in the backward passes), y
// its output (dy). All of dtype `data`, all NCHW or all channels-last.
struct ConvOperands {
  const Shape* x_shape;
  const Shape* w_shape;
  const Shape* y_shape;
  void* x;
  void* w;
  void* y;
};

// Runs a 16-bit convolution through the backend API, writing y (forward),
// x (backward data) or w (backward filter). False, with nothing run, for
// f32 data, under DDP_CUDNN_API=legacy, or when no engine's plan runs it:
// the caller then runs the legacy API.
bool RunBackendConv(ExecutionContext& ctx, ConvKind kind, const Conv2dParams& p, DType data, bool channels_last,
                    const ConvOperands& operands);

}  // namespace ddp::cuda
