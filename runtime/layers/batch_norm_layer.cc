#include "runtime/layers/batch_norm_layer.h"

#include "runtime/ops/elementwise.h"

namespace ddp {

BatchNormLayer::BatchNormLayer(int64_t channels, BatchNormParams params, bool relu)
    : channels_(channels), params_(params), relu_(relu) {
  weight_ = AddParameter("weight", {channels}, true);
  bias_ = AddParameter("bias", {channels}, true);
  running_mean_ = AddBuffer("running_mean", Tensor::Zeros({channels}, DType::kF32));
  running_var_ = AddBuffer("running_var", Tensor::Zeros({channels}, DType::kF32));
  num_batches_tracked_ = AddBuffer("num_batches_tracked", Tensor::Zeros({}, DType::kI64));
}

void BatchNormLayer::ResetOwnParameters(std::mt19937_64&) {
  weight_->value.Fill(zero_init_ ? 0.0 : 1.0);
  bias_->value.Fill(0.0);
  running_mean_->value.Fill(0.0);
  running_var_->value.Fill(1.0);
  num_batches_tracked_->value.Fill(0.0);
}

Tensor BatchNormLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) { return Normalize(ctx, x, nullptr); }

Tensor BatchNormLayer::ForwardWithResidual(ExecutionContext& ctx, const Tensor& x, const Tensor& residual) {
  CHECK(x.defined() && residual.defined()) << weight_->name << ": ForwardWithResidual of an undefined tensor";
  PrepareForward();
  return Normalize(ctx, x, &residual);
}

Tensor BatchNormLayer::Normalize(ExecutionContext& ctx, const Tensor& x, const Tensor* residual) {
  Tensor y = Tensor::EmptyLike(x);  // as the input
  const BatchNormEpilogue epilogue{residual, relu_};
  if (!training()) {
    BatchNormForwardInference(ctx, params_, x, weight_->value, bias_->value, running_mean_->value,
                              running_var_->value, y, epilogue);
    return y;
  }
  Tensor saved_mean = Tensor::Empty({channels_}, DType::kF32, x.device());
  Tensor saved_invstd = Tensor::Empty({channels_}, DType::kF32, x.device());
  // A checkpointed stage's second forward: the same batch statistics, but
  // the running ones were updated by the first.
  Tensor running_mean = running_mean_->value, running_var = running_var_->value;
  if (recomputing()) {
    running_mean = Tensor::Empty(running_mean.shape(), DType::kF32, x.device());
    running_var = Tensor::Empty(running_var.shape(), DType::kF32, x.device());
    Copy(ctx, running_mean_->value, running_mean);
    Copy(ctx, running_var_->value, running_var);
  }
  BatchNormForwardTraining(ctx, params_, x, weight_->value, bias_->value, y, saved_mean, saved_invstd, running_mean,
                           running_var, epilogue);
  if (!recomputing()) Increment(ctx, num_batches_tracked_->value);
  if (!keeps_for_backward()) return y;
  saved_mean_ = saved_mean;
  saved_invstd_ = saved_invstd;
  input_ = x;
  // The ReLU's backward masks by the output. Nothing writes y in place
  // afterwards (the fused layers replace the in-place ReLU), so a
  // reference suffices: the next layer keeps it anyway.
  if (relu_) output_ = y;
  return y;
}

Tensor BatchNormLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(input_.defined()) << weight_->name << ": Backward without a training Forward";
  Tensor dx = Tensor::EmptyLike(input_);
  // One kernel computes both; the bias is finished first (reverse
  // registration order). Staging slots are single, so stage the bias in a
  // tensor of its own.
  Tensor dbias = Tensor::Empty({channels_}, DType::kF32, dy.device());
  Tensor dweight = GradientTarget(ctx, *weight_);
  BatchNormBackward(ctx, params_, input_, dy, weight_->value, saved_mean_, saved_invstd_, dx, dweight, dbias,
                    {&output_, nullptr, relu_});
  FinishGradient(ctx, *bias_, dbias);
  FinishGradient(ctx, *weight_, dweight);
  input_ = output_ = saved_mean_ = saved_invstd_ = Tensor();
  return needs_input_grad() ? dx : Tensor();
}

Tensor BatchNormLayer::BackwardWithResidual(ExecutionContext& ctx, const Tensor& dy, Tensor* d_residual) {
  CHECK(training()) << "Backward in evaluation mode";
  CHECK(input_.defined()) << weight_->name << ": Backward without a training Forward";
  CHECK(!held_dweight_.defined()) << weight_->name << ": the last backward's gradients were never finished";
  PrepareForward();  // reads the weight, as Backward does
  Tensor dx = Tensor::EmptyLike(input_);
  *d_residual = Tensor::EmptyLike(input_);
  held_dweight_ = Tensor::Empty({channels_}, DType::kF32, dy.device());
  held_dbias_ = Tensor::Empty({channels_}, DType::kF32, dy.device());
  BatchNormBackward(ctx, params_, input_, dy, weight_->value, saved_mean_, saved_invstd_, dx, held_dweight_,
                    held_dbias_, {&output_, d_residual, relu_});
  input_ = output_ = saved_mean_ = saved_invstd_ = Tensor();
  return dx;
}

void BatchNormLayer::FinishHeldGradients(ExecutionContext& ctx) {
  CHECK(held_dweight_.defined()) << weight_->name << ": no held gradients to finish";
  FinishGradient(ctx, *bias_, held_dbias_);
  FinishGradient(ctx, *weight_, held_dweight_);
  held_dweight_ = held_dbias_ = Tensor();
}

}  // namespace ddp
