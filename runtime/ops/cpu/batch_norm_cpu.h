// OpenMP implementation of runtime/ops/batch_norm.h; arguments are checked there.
#pragma once

#include "runtime/ops/batch_norm.h"

namespace ddp::cpu {

void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue);
void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, Tensor& y, const BatchNormEpilogue& epilogue);
void BatchNormBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta, const BatchNormEpilogueGrad& epilogue);

}  // namespace ddp::cpu
