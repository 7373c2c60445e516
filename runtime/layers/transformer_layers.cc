#include "runtime/layers/transformer_layers.h"

#include "runtime/ops/elementwise.h"
#include "runtime/ops/transformer.h"

namespace ddp {

LayerNormLayer::LayerNormLayer(int64_t hidden, double eps) : hidden_(hidden), eps_(eps) {
  weight_ = AddParameter("weight", {hidden}, true);
  bias_ = AddParameter("bias", {hidden}, true);
}

void LayerNormLayer::ResetOwnParameters(std::mt19937_64&) {
  weight_->value.Fill(1.0);
  bias_->value.Fill(0.0);
}

Tensor LayerNormLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  CHECK(x.ndim() == 2 && x.dim(1) == hidden_) << weight_->name << ": input " << x.DebugString() << ", expected [R, "
                                              << hidden_ << "]";
  Tensor y = Tensor::EmptyLike(x);
  Tensor mean = Tensor::Empty({x.dim(0)}, DType::kF32, x.device());
  Tensor rstd = Tensor::Empty({x.dim(0)}, DType::kF32, x.device());
  LayerNormForward(ctx, x, weight_->value, bias_->value, eps_, y, mean, rstd);
  if (keeps_for_backward()) {
    input_ = x;
    mean_ = mean;
    rstd_ = rstd;
  }
  return y;
}

Tensor LayerNormLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(input_.defined()) << weight_->name << ": Backward without a training Forward";
  Tensor dx = Tensor::EmptyLike(input_);
  Tensor dgamma = Tensor::Empty({hidden_}, DType::kF32, dy.device());
  Tensor dbeta = Tensor::Empty({hidden_}, DType::kF32, dy.device());
  LayerNormBackward(ctx, input_, dy, weight_->value, mean_, rstd_, dx, dgamma, dbeta);
  FinishGradient(ctx, *bias_, dbeta);
  FinishGradient(ctx, *weight_, dgamma);
  input_ = mean_ = rstd_ = Tensor();
  return dx;
}

EmbeddingLayer::EmbeddingLayer(int64_t num, int64_t dim, double init_std, int64_t padding_idx)
    : num_(num), dim_(dim), init_std_(init_std), padding_idx_(padding_idx) {
  weight_ = AddParameter("weight", {num, dim}, false);
  weight_->forward_reads_f32 = true;  // lookups in f32, whatever the activations' dtype
}

void EmbeddingLayer::ResetOwnParameters(std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, init_std_);
  float* w = weight_->value.data<float>();
  for (int64_t i = 0; i < weight_->value.numel(); ++i) w[i] = static_cast<float>(normal(rng));
  if (padding_idx_ >= 0) weight_->value.View(padding_idx_ * dim_, {dim_}).Fill(0.0);
}

Tensor EmbeddingLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& ids) {
  Tensor out = Tensor::Empty({ids.numel(), dim_}, DType::kF32, ids.device());
  EmbeddingForward(ctx, weight_->value, ids, out);
  if (keeps_for_backward()) ids_ = ids;
  return out;
}

Tensor EmbeddingLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(ids_.defined()) << weight_->name << ": Backward without a training Forward";
  Tensor target = GradientTarget(ctx, *weight_);
  EmbeddingBackward(ctx, ids_, dy, target, padding_idx_);
  if (tied_gradient_.defined()) Axpy(ctx, 1.0f, tied_gradient_, target);
  FinishGradient(ctx, *weight_, target);
  ids_ = tied_gradient_ = Tensor();
  return Tensor();
}

}  // namespace ddp
