#include "runtime/layers/linear_layer.h"

#include <cmath>

#include "runtime/ops/linear.h"

namespace ddp {

LinearLayer::LinearLayer(int64_t in_features, int64_t out_features, bool bias, double init_std, LinearOutput output)
    : in_(in_features), out_(out_features), init_std_(init_std), output_(output) {
  weight_ = AddParameter("weight", {out_features, in_features}, false);
  if (bias) {
    bias_ = AddParameter("bias", {out_features}, true);
    bias_->forward_reads_f32 = output == LinearOutput::kF32;  // else its 16-bit copy rides the epilogue
  }
}

void LinearLayer::ResetOwnParameters(std::mt19937_64& rng) {
  if (init_std_ > 0.0) {
    std::normal_distribution<double> normal(0.0, init_std_);
    float* w = weight_->value.data<float>();
    for (int64_t i = 0; i < weight_->value.numel(); ++i) w[i] = static_cast<float>(normal(rng));
    if (bias_ != nullptr) bias_->value.Fill(0.0);
    return;
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
  std::uniform_real_distribution<double> uniform(-bound, bound);
  for (Parameter* p : {weight_, bias_}) {
    if (p == nullptr) continue;
    float* v = p->value.data<float>();
    for (int64_t i = 0; i < p->value.numel(); ++i) v[i] = static_cast<float>(uniform(rng));
  }
}

Tensor LinearLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  const DType dtype = output_ == LinearOutput::kInputDType ? x.dtype() : DType::kF32;
  Tensor y = Tensor::Empty({x.dim(0), out_}, dtype, x.device());
  LinearForward(ctx, x, WeightsFor(*weight_, x), bias_ ? &WeightsFor(*bias_, y) : nullptr, y);
  if (keeps_for_backward()) input_ = x;
  return y;
}

Tensor LinearLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(input_.defined()) << weight_->name << ": Backward without a training Forward";
  Tensor dw = GradientTarget(ctx, *weight_);
  Tensor db = bias_ ? Tensor::Empty({out_}, DType::kF32, dy.device()) : Tensor();
  LinearBackwardWeights(ctx, input_, dy, dw, bias_ ? &db : nullptr);
  if (bias_) FinishGradient(ctx, *bias_, db);
  FinishGradient(ctx, *weight_, dw);
  Tensor dx;
  if (needs_input_grad()) {
    dx = Tensor::Empty(input_.shape(), input_.dtype(), dy.device());
    LinearBackwardData(ctx, dy, WeightsFor(*weight_, input_), &dx);
  }
  input_ = Tensor();
  return dx;
}

}  // namespace ddp
