// CUDA batch normalization: own kernels, the semantics of
// cpu/batch_norm_cpu.h (PyTorch's: biased variance normalizes, unbiased
// feeds the running variance; saved 1 / sqrt(var + eps)), with the fused
// epilogues of batch_norm.h (+ residual, ReLU; the masked gradient written
// for the residual), f32/bf16/f16 activations with f32 statistics, and
// NCHW or channels-last input.
//
// Per-channel sums run in two stages, fixed blocks then the blocks in order
// in f64, so results do not depend on scheduling (no atomics). The forward
// is one pass for the statistics (sums shifted by each channel's first
// value, so a large mean does not cancel the variance) and one to apply.
// Declared without CUDA types; defined only in builds with nvcc.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/batch_norm.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue);
void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                               const BatchNormEpilogue& epilogue);
void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy,
                       const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                       Tensor& dgamma, Tensor& dbeta, const BatchNormEpilogueGrad& epilogue);

}  // namespace ddp::cuda
