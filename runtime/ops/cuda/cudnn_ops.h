// Convolution on CUDA through cuDNN. 16-bit data goes through the backend
// (graph) API (cudnn_graph.h): on Hopper the legacy API offers bf16
// channels-last backward passes only generic kernels (ResNet-50 trained at
// a fifteenth of its fp32 speed).
// f32 data, and 16-bit data under DDP_CUDNN_API=legacy, go through the
// legacy API (cudnnConvolution*), deprecated in cuDNN 9 but shipped and
// working there; its deprecation warnings are silenced for this library
// alone.
//
// Legacy convolution algorithms are chosen once per shape and cached: by
// timing (cudnnFind*AlgorithmEx, as torch.backends.cudnn.benchmark) by
// default, or, with ctx.deterministic(), by cuDNN's heuristics among
// deterministic algorithms only, so every run picks the same. fp32 uses
// CUDNN_FMA_MATH (no TF32); ctx.allow_tf32() lets cuDNN use TF32 tensor
// cores. Bias gradients are this runtime's own deterministic reduction
// (cuDNN's failed a 16-bit case on an H200). Workspaces come from the
// context's scratch memory (the caching allocator), within WorkspaceLimit
// (cudnn_util.h).
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/conv2d.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias,
                   Tensor& y);
void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                           Tensor* dbias);

}  // namespace ddp::cuda
