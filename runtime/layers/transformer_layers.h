// Layers of transformer models, with torch.nn's parameter names:
// LayerNorm ("weight", "bias") and Embedding ("weight").
#pragma once

#include "runtime/layers/layer.h"

namespace ddp {

// torch.nn.LayerNorm(hidden, eps) over the last dimension of [R, hidden]:
// weight ones, bias zeros, both normalization parameters (exempt from
// weight decay with --nodecay-bn-bias).
class LayerNormLayer : public Layer {
 public:
  LayerNormLayer(int64_t hidden, double eps);

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;
  void ResetOwnParameters(std::mt19937_64& rng) override;

 private:
  int64_t hidden_;
  double eps_;
  Parameter* weight_;
  Parameter* bias_;
  Tensor input_, mean_, rstd_;
};

// torch.nn.Embedding(num, dim, padding_idx): Forward takes i64 ids of any
// shape and returns [ids.numel(), dim]; Backward returns no input gradient.
// Weights start N(0, init_std^2) with the padding row zero (Hugging Face
// BERT's initialization), and the padding row gets no gradient.
class EmbeddingLayer : public Layer {
 public:
  EmbeddingLayer(int64_t num, int64_t dim, double init_std, int64_t padding_idx = -1);
  Parameter* weight() { return weight_; }
  // A gradient of the weight from elsewhere in the model (a decoder tied to
  // these embeddings), added before the weight's gradient is finished in
  // this backward pass.
  void AddTiedGradient(Tensor gradient) { tied_gradient_ = std::move(gradient); }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& ids) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;
  void ResetOwnParameters(std::mt19937_64& rng) override;
  bool backward_reads_parameters() const override { return false; }  // a scatter-add of dy

 private:
  int64_t num_, dim_;
  double init_std_;
  int64_t padding_idx_;
  Parameter* weight_;
  Tensor ids_, tied_gradient_;
};

}  // namespace ddp
