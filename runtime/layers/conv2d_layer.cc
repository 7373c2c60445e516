#include "runtime/layers/conv2d_layer.h"

#include <cmath>

namespace ddp {

Conv2dLayer::Conv2dLayer(const Conv2dLayerOptions& options) : options_(options) {
  CHECK(options.in_channels > 0 && options.out_channels > 0 && options.kernel > 0 && options.groups > 0 &&
        options.in_channels % options.groups == 0 && options.out_channels % options.groups == 0)
      << "Conv2dLayer: bad channels/kernel/groups";
  params_.stride_h = params_.stride_w = options.stride;
  params_.pad_h = params_.pad_w = options.padding;
  params_.dilation_h = params_.dilation_w = options.dilation;
  params_.groups = options.groups;
  weight_ = AddParameter(
      "weight", {options.out_channels, options.in_channels / options.groups, options.kernel, options.kernel}, false);
  if (options.bias) bias_ = AddParameter("bias", {options.out_channels}, true);
}

void Conv2dLayer::ResetOwnParameters(std::mt19937_64& rng) {
  const double fan_out = static_cast<double>(options_.out_channels * options_.kernel * options_.kernel);
  std::normal_distribution<double> normal(0.0, std::sqrt(2.0 / fan_out));
  float* w = weight_->value.data<float>();
  for (int64_t i = 0; i < weight_->value.numel(); ++i) w[i] = static_cast<float>(normal(rng));
  if (bias_) bias_->value.Fill(0.0);
}

Tensor Conv2dLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  Tensor y = Tensor::Empty(Conv2dOutputShape(x.shape(), weight_->shape, params_), x.dtype(), x.device(), x.format());
  Conv2dForward(ctx, params_, x, WeightsFor(*weight_, x), bias_ ? &bias_->value : nullptr, y);
  if (keeps_for_backward()) input_ = x;
  return y;
}

Tensor Conv2dLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(input_.defined()) << weight_->name << ": Backward without a training Forward";
  Tensor dx;
  if (needs_input_grad()) {
    dx = Tensor::EmptyLike(input_);
    Conv2dBackwardData(ctx, params_, dy, WeightsFor(*weight_, input_), dx);
  }
  // Bias before weight: reverse registration order. oneDNN computes both in
  // one primitive, so the bias is staged with the weight.
  Tensor dw = GradientTarget(ctx, *weight_);
  if (bias_) {
    Tensor db = Tensor::Empty(bias_->shape, DType::kF32, dy.device());
    Conv2dBackwardWeights(ctx, params_, input_, dy, dw, &db);
    FinishGradient(ctx, *bias_, db);
  } else {
    Conv2dBackwardWeights(ctx, params_, input_, dy, dw, nullptr);
  }
  FinishGradient(ctx, *weight_, dw);
  input_ = Tensor();
  return dx;
}

}  // namespace ddp
