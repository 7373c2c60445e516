#include "runtime/ops/batch_norm.h"

#include "runtime/ops/cpu/batch_norm_cpu.h"
#include "runtime/ops/cuda/cudnn_ops.h"
#include "runtime/ops/op_checks.h"

namespace ddp {
namespace {

void CheckChannelTensor(const Tensor& x, const Tensor& t, const char* what) {
  CHECK(t.shape() == Shape{x.dim(1)}) << "batch norm " << what << " " << t.DebugString() << " for input "
                                      << x.DebugString();
  CheckF32(t, what);
}

// Activations may be bf16 (CheckActivation); statistics and parameters are
// f32, as in cuDNN and autocast.
void CheckInput(const ExecutionContext& ctx, const Tensor& x) {
  CHECK(x.ndim() == 2 || x.ndim() == 4) << "batch norm input must be NC or NCHW, got " << x.DebugString();
  CheckActivation(ctx, x, "batch norm input");
}

void CheckLikeInput(const Tensor& x, const Tensor& t, const char* what) {
  CheckSameShape(x, t, what);
  CHECK(t.dtype() == x.dtype()) << what << " " << t.DebugString() << " for input " << x.DebugString();
  CheckSameFormat(x, t, what);
}

}  // namespace

void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var) {
  CheckInput(ctx, x);
  CheckLikeInput(x, y, "batch norm output");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&beta, "bias"},
                         {&saved_mean, "saved mean"}, {&saved_invstd, "saved invstd"},
                         {&running_mean, "running mean"}, {&running_var, "running var"}}) {
    CheckChannelTensor(x, *t, what);
  }
  CHECK_GT(x.numel() / x.dim(1), 1) << "batch norm in training needs more than one value per channel, got "
                                    << x.DebugString();
  CheckOnDevice(ctx, "BatchNormForwardTraining",
                {&x, &gamma, &beta, &y, &saved_mean, &saved_invstd, &running_mean, &running_var});
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormForwardTraining",
                       cuda::BatchNormForwardTraining(ctx, p, x, gamma, beta, y, saved_mean, saved_invstd,
                                                      running_mean, running_var));
  }
  cpu::BatchNormForwardTraining(ctx, p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var);
}

void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, Tensor& y) {
  CheckInput(ctx, x);
  CheckLikeInput(x, y, "batch norm output");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&beta, "bias"},
                         {&running_mean, "running mean"}, {&running_var, "running var"}}) {
    CheckChannelTensor(x, *t, what);
  }
  CheckOnDevice(ctx, "BatchNormForwardInference", {&x, &gamma, &beta, &running_mean, &running_var, &y});
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormForwardInference",
                       cuda::BatchNormForwardInference(ctx, p, x, gamma, beta, running_mean, running_var, y));
  }
  cpu::BatchNormForwardInference(ctx, p, x, gamma, beta, running_mean, running_var, y);
}

void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta) {
  CheckInput(ctx, x);
  CheckLikeInput(x, dy, "batch norm output gradient");
  CheckLikeInput(x, dx, "batch norm input gradient");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&saved_mean, "saved mean"},
                         {&saved_invstd, "saved invstd"}, {&dgamma, "weight gradient"},
                         {&dbeta, "bias gradient"}}) {
    CheckChannelTensor(x, *t, what);
  }
  CheckOnDevice(ctx, "BatchNormBackward", {&x, &dy, &gamma, &saved_mean, &saved_invstd, &dx, &dgamma, &dbeta});
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormBackward",
                       cuda::BatchNormBackward(ctx, p, x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta));
  }
  cpu::BatchNormBackward(ctx, x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta);
}

}  // namespace ddp
