#include "launch/tiny_cnn.h"

#include <cmath>
#include <random>

#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"

namespace ddp {
namespace {

// Kaiming-uniform initialisation as PyTorch's default for conv and linear:
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for a = sqrt(5).
Tensor UniformInit(const Shape& shape, int64_t fan_in, std::mt19937_64& rng) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  std::uniform_real_distribution<double> dist(-bound, bound);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(dist(rng));
  return t;
}

Tensor Constant(const Shape& shape, double value) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  t.Fill(value);
  return t;
}

}  // namespace

TinyCnn::TinyCnn(const TinyCnnConfig& config, uint64_t seed) : config_(config) {
  std::mt19937_64 rng(seed);
  const int64_t w1 = config.width, w2 = 2 * config.width;
  conv1_.pad_h = conv1_.pad_w = 1;
  conv2_.pad_h = conv2_.pad_w = 1;
  conv2_.stride_h = conv2_.stride_w = 2;
  pool_.kernel_h = pool_.kernel_w = 3;
  pool_.stride_h = pool_.stride_w = 2;
  pool_.pad_h = pool_.pad_w = 1;
  auto add = [&](const std::string& name, Tensor value) {
    params_.push_back({name, value, Tensor::Zeros(value.shape(), DType::kF32),
                       Tensor::Zeros(value.shape(), DType::kF32)});
  };
  add("conv1.weight", UniformInit({w1, config.in_channels, 3, 3}, config.in_channels * 9, rng));
  add("bn1.weight", Constant({w1}, 1.0));
  add("bn1.bias", Constant({w1}, 0.0));
  add("conv2.weight", UniformInit({w2, w1, 3, 3}, w1 * 9, rng));
  add("bn2.weight", Constant({w2}, 1.0));
  add("bn2.bias", Constant({w2}, 0.0));
  add("fc.weight", UniformInit({config.num_classes, w2}, w2, rng));
  add("fc.bias", UniformInit({config.num_classes}, w2, rng));
  bn1_mean_ = Constant({w1}, 0.0);
  bn1_var_ = Constant({w1}, 1.0);
  bn2_mean_ = Constant({w2}, 0.0);
  bn2_var_ = Constant({w2}, 1.0);
}

TinyCnnParameter& TinyCnn::Param(const std::string& name) {
  for (TinyCnnParameter& p : params_) {
    if (p.name == name) return p;
  }
  LOG(FATAL) << "no parameter " << name;
}

int64_t TinyCnn::num_parameters() const {
  int64_t n = 0;
  for (const TinyCnnParameter& p : params_) n += p.value.numel();
  return n;
}

void TinyCnn::EnsureActivations(const Shape& image_shape) {
  if (image_shape == image_shape_) return;
  image_shape_ = image_shape;
  const int64_t w1 = config_.width, w2 = 2 * config_.width, n = image_shape[0];
  const Shape s1 = Conv2dOutputShape(image_shape, {w1, config_.in_channels, 3, 3}, conv1_);
  const Shape sp = Pool2dOutputShape(s1, pool_);
  const Shape s2 = Conv2dOutputShape(sp, {w2, w1, 3, 3}, conv2_);
  c1_ = Tensor::Empty(s1, DType::kF32);
  b1_ = Tensor::Empty(s1, DType::kF32);
  b1_mean_ = Tensor::Empty({w1}, DType::kF32);
  b1_invstd_ = Tensor::Empty({w1}, DType::kF32);
  p1_ = Tensor::Empty(sp, DType::kF32);
  p1_argmax_ = Tensor::Empty(sp, DType::kI32);
  c2_ = Tensor::Empty(s2, DType::kF32);
  b2_ = Tensor::Empty(s2, DType::kF32);
  b2_mean_ = Tensor::Empty({w2}, DType::kF32);
  b2_invstd_ = Tensor::Empty({w2}, DType::kF32);
  gap_ = Tensor::Empty({n, w2}, DType::kF32);
  logits_ = Tensor::Empty({n, config_.num_classes}, DType::kF32);
  probs_ = Tensor::Empty({n, config_.num_classes}, DType::kF32);
}

double TinyCnn::ForwardBackward(ExecutionContext& ctx, const Tensor& images, const Tensor& labels) {
  EnsureActivations(images.shape());
  TinyCnnParameter &conv1 = Param("conv1.weight"), &bn1w = Param("bn1.weight"), &bn1b = Param("bn1.bias"),
                   &conv2 = Param("conv2.weight"), &bn2w = Param("bn2.weight"), &bn2b = Param("bn2.bias"),
                   &fcw = Param("fc.weight"), &fcb = Param("fc.bias");
  // Forward, keeping what backward needs. ReLU runs in place on the BN output.
  Conv2dForward(ctx, conv1_, images, conv1.value, nullptr, c1_);
  BatchNormForwardTraining(ctx, bn_, c1_, bn1w.value, bn1b.value, b1_, b1_mean_, b1_invstd_, bn1_mean_, bn1_var_);
  ReluForward(ctx, b1_, b1_);
  MaxPool2dForward(ctx, pool_, b1_, p1_, p1_argmax_);
  Conv2dForward(ctx, conv2_, p1_, conv2.value, nullptr, c2_);
  BatchNormForwardTraining(ctx, bn_, c2_, bn2w.value, bn2b.value, b2_, b2_mean_, b2_invstd_, bn2_mean_, bn2_var_);
  ReluForward(ctx, b2_, b2_);
  GlobalAvgPoolForward(ctx, b2_, gap_);
  LinearForward(ctx, gap_, fcw.value, &fcb.value, logits_);
  const CrossEntropyResult loss = SoftmaxCrossEntropyForward(ctx, CrossEntropyParams(), logits_, labels, probs_);

  // Backward, in reverse.
  Tensor dlogits = Tensor::Empty(logits_.shape(), DType::kF32);
  SoftmaxCrossEntropyBackward(ctx, CrossEntropyParams(), probs_, labels, 1.0, dlogits);
  Tensor dgap = Tensor::Empty(gap_.shape(), DType::kF32);
  LinearBackwardWeights(ctx, gap_, dlogits, fcw.grad, &fcb.grad);
  LinearBackwardData(ctx, dlogits, fcw.value, &dgap);
  Tensor db2 = Tensor::Empty(b2_.shape(), DType::kF32);
  GlobalAvgPoolBackward(ctx, dgap, db2);
  ReluBackward(ctx, b2_, db2, db2);
  Tensor dc2 = Tensor::Empty(c2_.shape(), DType::kF32);
  BatchNormBackward(ctx, c2_, db2, bn2w.value, b2_mean_, b2_invstd_, dc2, bn2w.grad, bn2b.grad);
  Conv2dBackwardWeights(ctx, conv2_, p1_, dc2, conv2.grad, nullptr);
  Tensor dp1 = Tensor::Empty(p1_.shape(), DType::kF32);
  Conv2dBackwardData(ctx, conv2_, dc2, conv2.value, dp1);
  Tensor db1 = Tensor::Empty(b1_.shape(), DType::kF32);
  MaxPool2dBackward(ctx, dp1, p1_argmax_, db1);
  ReluBackward(ctx, b1_, db1, db1);
  Tensor dc1 = Tensor::Empty(c1_.shape(), DType::kF32);
  BatchNormBackward(ctx, c1_, db1, bn1w.value, b1_mean_, b1_invstd_, dc1, bn1w.grad, bn1b.grad);
  Conv2dBackwardWeights(ctx, conv1_, images, dc1, conv1.grad, nullptr);
  return loss.loss;
}

Tensor TinyCnn::Predict(ExecutionContext& ctx, const Tensor& images) {
  EnsureActivations(images.shape());
  Conv2dForward(ctx, conv1_, images, Param("conv1.weight").value, nullptr, c1_);
  BatchNormForwardInference(ctx, bn_, c1_, Param("bn1.weight").value, Param("bn1.bias").value, bn1_mean_, bn1_var_,
                            b1_);
  ReluForward(ctx, b1_, b1_);
  MaxPool2dForward(ctx, pool_, b1_, p1_, p1_argmax_);
  Conv2dForward(ctx, conv2_, p1_, Param("conv2.weight").value, nullptr, c2_);
  BatchNormForwardInference(ctx, bn_, c2_, Param("bn2.weight").value, Param("bn2.bias").value, bn2_mean_, bn2_var_,
                            b2_);
  ReluForward(ctx, b2_, b2_);
  GlobalAvgPoolForward(ctx, b2_, gap_);
  LinearForward(ctx, gap_, Param("fc.weight").value, &Param("fc.bias").value, logits_);
  return logits_.Clone();
}

void TinyCnn::SgdStep(ExecutionContext& ctx, float lr, float momentum, float weight_decay) {
  for (TinyCnnParameter& p : params_) {
    // g = grad + wd * w; buf = momentum * buf + g; w -= lr * buf.
    if (weight_decay != 0.0f) Axpy(ctx, weight_decay, p.value, p.grad);
    Scale(ctx, momentum, p.momentum);
    Axpy(ctx, 1.0f, p.grad, p.momentum);
    Axpy(ctx, -lr, p.momentum, p.value);
  }
}

}  // namespace ddp
