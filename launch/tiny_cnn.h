// A small convolutional classifier wired directly from the runtime's ops,
// with PyTorch-style parameter names. It is the foundation's end-to-end
// check that the ops train together (forward, backward, SGD) and the model
// the quick start trains until the layer-based model registry (ResNet,
// BERT) takes over.
//
//   conv1 3x3 -> bn1 -> relu -> maxpool 3x3/2 -> conv2 3x3/2 -> bn2 -> relu
//   -> global average pool -> fc
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/execution_context.h"
#include "runtime/ops/batch_norm.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/pooling.h"
#include "runtime/tensor.h"

namespace ddp {

struct TinyCnnConfig {
  int64_t in_channels = 3;
  int64_t width = 16;  // conv1 channels; conv2 has twice as many
  int64_t num_classes = 10;
};

struct TinyCnnParameter {
  std::string name;
  Tensor value;
  Tensor grad;
  Tensor momentum;  // SGD momentum buffer
};

class TinyCnn {
 public:
  TinyCnn(const TinyCnnConfig& config, uint64_t seed);

  // Forward and backward on one batch; returns the mean cross-entropy loss.
  // Gradients land in each parameter's `grad`.
  double ForwardBackward(ExecutionContext& ctx, const Tensor& images, const Tensor& labels);
  // Logits for `images` with BN in eval mode (running statistics).
  Tensor Predict(ExecutionContext& ctx, const Tensor& images);
  // torch.optim.SGD with momentum and weight decay.
  void SgdStep(ExecutionContext& ctx, float lr, float momentum, float weight_decay);

  std::vector<TinyCnnParameter>& parameters() { return params_; }
  int64_t num_parameters() const;

 private:
  TinyCnnParameter& Param(const std::string& name);
  void EnsureActivations(const Shape& image_shape);

  TinyCnnConfig config_;
  Conv2dParams conv1_, conv2_;
  Pool2dParams pool_;
  BatchNormParams bn_;
  std::vector<TinyCnnParameter> params_;
  Tensor bn1_mean_, bn1_var_, bn2_mean_, bn2_var_;  // running statistics

  // Activations kept for backward, sized for the current batch.
  Shape image_shape_;
  Tensor c1_, b1_, b1_mean_, b1_invstd_, p1_, p1_argmax_, c2_, b2_, b2_mean_, b2_invstd_, gap_, logits_, probs_;
};

}  // namespace ddp
