// Convolution on CUDA through cuDNN's legacy API (cudnnConvolution*):
// deprecated in cuDNN 9 but
// shipped and working there, and far smaller to drive than the backend
// graph API without cudnn-frontend, which is neither packaged nor vendored.
// The deprecation warnings are silenced for cudnn_ops.cu alone.
//
// Convolution algorithms are chosen once per shape and cached: by timing
// (cudnnFind*AlgorithmEx, as torch.backends.cudnn.benchmark) by default,
// or, with ctx.deterministic(), by cuDNN's heuristics among deterministic
// algorithms only, so every run picks the same. fp32 uses CUDNN_FMA_MATH
// (no TF32); ctx.allow_tf32() lets cuDNN use TF32 tensor cores.
// Workspaces come from the context's scratch memory (the caching allocator).
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
