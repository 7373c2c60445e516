#include "runtime/ops/batch_norm.h"

#include <vector>

#include "runtime/ops/cpu/batch_norm_cpu.h"
#include "runtime/ops/cuda/batch_norm_cuda.h"
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
  CheckActivation(ctx, x, "batch norm input", /*cuda_channels_last=*/true);
}

void CheckLikeInput(const Tensor& x, const Tensor& t, const char* what) {
  CheckSameShape(x, t, what);
  CHECK(t.dtype() == x.dtype()) << what << " " << t.DebugString() << " for input " << x.DebugString();
  CheckSameFormat(x, t, what);
}

void CheckEpilogue(const Tensor& x, const BatchNormEpilogue& e, std::vector<const Tensor*>* on_device) {
  if (e.residual == nullptr) return;
  CheckLikeInput(x, *e.residual, "batch norm residual");
  on_device->push_back(e.residual);
}

void CheckEpilogueGrad(const Tensor& x, const BatchNormEpilogueGrad& e, std::vector<const Tensor*>* on_device) {
  if (e.relu) {
    CHECK(e.y != nullptr) << "batch norm backward through a ReLU needs the forward's output";
    CheckLikeInput(x, *e.y, "batch norm output");
    on_device->push_back(e.y);
  }
  if (e.d_residual != nullptr) {
    CheckLikeInput(x, *e.d_residual, "batch norm residual gradient");
    on_device->push_back(e.d_residual);
  }
}

void CheckAllOnDevice(const ExecutionContext& ctx, const char* op, const std::vector<const Tensor*>& tensors) {
  for (const Tensor* t : tensors) CheckOnDevice(ctx, op, {t});
}

}  // namespace

void BatchNormForwardTraining(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_invstd,
                              Tensor& running_mean, Tensor& running_var, const BatchNormEpilogue& epilogue) {
  CheckInput(ctx, x);
  CheckLikeInput(x, y, "batch norm output");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&beta, "bias"},
                         {&saved_mean, "saved mean"}, {&saved_invstd, "saved invstd"},
                         {&running_mean, "running mean"}, {&running_var, "running var"}}) {
    CheckChannelTensor(x, *t, what);
  }
  CHECK_GT(x.numel() / x.dim(1), 1) << "batch norm in training needs more than one value per channel, got "
                                    << x.DebugString();
  std::vector<const Tensor*> tensors = {&x, &gamma, &beta, &y, &saved_mean, &saved_invstd, &running_mean,
                                        &running_var};
  CheckEpilogue(x, epilogue, &tensors);
  CheckAllOnDevice(ctx, "BatchNormForwardTraining", tensors);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormForwardTraining",
                       cuda::BatchNormForwardTraining(ctx, p, x, gamma, beta, y, saved_mean, saved_invstd,
                                                      running_mean, running_var, epilogue));
  }
  cpu::BatchNormForwardTraining(ctx, p, x, gamma, beta, y, saved_mean, saved_invstd, running_mean, running_var,
                                epilogue);
}

void BatchNormForwardInference(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, Tensor& y, const BatchNormEpilogue& epilogue) {
  CheckInput(ctx, x);
  CheckLikeInput(x, y, "batch norm output");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&beta, "bias"},
                         {&running_mean, "running mean"}, {&running_var, "running var"}}) {
    CheckChannelTensor(x, *t, what);
  }
  std::vector<const Tensor*> tensors = {&x, &gamma, &beta, &running_mean, &running_var, &y};
  CheckEpilogue(x, epilogue, &tensors);
  CheckAllOnDevice(ctx, "BatchNormForwardInference", tensors);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormForwardInference",
                       cuda::BatchNormForwardInference(ctx, p, x, gamma, beta, running_mean, running_var, y, epilogue));
  }
  cpu::BatchNormForwardInference(ctx, p, x, gamma, beta, running_mean, running_var, y, epilogue);
}

void BatchNormBackward(ExecutionContext& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy,
                       const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                       Tensor& dgamma, Tensor& dbeta, const BatchNormEpilogueGrad& epilogue) {
  CheckInput(ctx, x);
  CheckLikeInput(x, dy, "batch norm output gradient");
  CheckLikeInput(x, dx, "batch norm input gradient");
  for (auto [t, what] : {std::pair<const Tensor*, const char*>{&gamma, "weight"}, {&saved_mean, "saved mean"},
                         {&saved_invstd, "saved invstd"}, {&dgamma, "weight gradient"},
                         {&dbeta, "bias gradient"}}) {
    CheckChannelTensor(x, *t, what);
  }
  std::vector<const Tensor*> tensors = {&x, &dy, &gamma, &saved_mean, &saved_invstd, &dx, &dgamma, &dbeta};
  CheckEpilogueGrad(x, epilogue, &tensors);
  CheckAllOnDevice(ctx, "BatchNormBackward", tensors);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("BatchNormBackward", cuda::BatchNormBackward(ctx, p, x, dy, gamma, saved_mean, saved_invstd,
                                                                    dx, dgamma, dbeta, epilogue));
  }
  cpu::BatchNormBackward(ctx, x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, epilogue);
}

}  // namespace ddp
