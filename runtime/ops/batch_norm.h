// Batch normalization over NCHW (or NC) tensors, per channel, as
// torch.nn.BatchNorm2d: biased batch variance normalizes, the unbiased one
// feeds the running variance.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

struct BatchNormParams {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch
};

// What the forward fuses after the normalization, in one pass over memory:
// y = relu(bn(x) + residual), each part optional. ResNet's blocks end in
// batch norm + add + ReLU, and every other batch norm there is followed by
// a ReLU; fused, the forward reads x twice and writes y once instead of the
// five to eight passes of separate ops. NaN passes the ReLU, as in ReluForward.
struct BatchNormEpilogue {
  const Tensor* residual = nullptr;  // like x: shape, dtype, format
  bool relu = false;
};

// Backward through the same epilogue. With relu, dy is first masked by the
// forward's output y (dy where y > 0 or NaN, else 0, as ReluBackward); with
// d_residual, that masked gradient, which is the residual's gradient, is
// written there as well.
struct BatchNormEpilogueGrad {
  const Tensor* y = nullptr;      // the forward's output; needed with relu
  Tensor* d_residual = nullptr;   // like x
  bool relu = false;
};

// Training mode. Writes y, this batch's per-channel mean and inverse standard
// deviation (kept for backward), and updates the running statistics.
void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue = {});
// Evaluation mode: normalizes with the running statistics.
void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, Tensor& y, const BatchNormEpilogue& epilogue = {});
// Backward of training mode, through the batch statistics; `p` is the
// forward's (cuDNN asks for the same epsilon in both).
void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy,
                       const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                       Tensor& dgamma, Tensor& dbeta, const BatchNormEpilogueGrad& epilogue = {});

}  // namespace ddp
