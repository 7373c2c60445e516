// torch.nn.Linear: parameters "weight" [out, in] and "bias" [out].
#pragma once

#include "runtime/layers/layer.h"

namespace ddp {

// What a 16-bit input (mixed precision) gives: f32 output (logits for a
// loss: the default), or output of the input's dtype (hidden states inside
// a model whose activations stay 16-bit, the bias then rounded to it as
// PyTorch's autocast does). An f32 input always gives f32.
enum class LinearOutput { kF32, kInputDType };

class LinearLayer : public Layer {
 public:
  // `init_std` > 0: weights drawn from N(0, init_std^2) and a zero bias
  // (Hugging Face BERT's initialization), instead of PyTorch's default.
  LinearLayer(int64_t in_features, int64_t out_features, bool bias = true, double init_std = 0.0,
              LinearOutput output = LinearOutput::kF32);
  Parameter* weight() { return weight_; }
  Parameter* bias() { return bias_; }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  void ResetOwnParameters(std::mt19937_64& rng) override;

 private:
  int64_t in_, out_;
  double init_std_;
  LinearOutput output_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  Tensor input_;
};

}  // namespace ddp
