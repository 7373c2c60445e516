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

// Training mode. Writes y, this batch's per-channel mean and inverse standard
// deviation (kept for backward), and updates the running statistics.
void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var);
// Evaluation mode: normalizes with the running statistics.
void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, Tensor& y);
// Backward of training mode, through the batch statistics; `p` is the
// forward's (cuDNN asks for the same epsilon in both).
void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta);

}  // namespace ddp
