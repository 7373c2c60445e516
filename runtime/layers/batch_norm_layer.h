// torch.nn.BatchNorm2d (and 1d over [N, C]): parameters "weight", "bias";
// buffers "running_mean", "running_var" and the 0-dimensional i64
// "num_batches_tracked". Momentum 0.1, eps 1e-5.
//
// Fused epilogues (batch_norm.h): with `relu` the layer is BN + ReLU in one
// pass; ForwardWithResidual is a residual block's BN + add + ReLU.
#pragma once

#include "runtime/layers/layer.h"
#include "runtime/ops/batch_norm.h"

namespace ddp {

class BatchNormLayer : public Layer {
 public:
  explicit BatchNormLayer(int64_t channels, BatchNormParams params = {}, bool relu = false);
  Parameter* weight() { return weight_; }
  // y = relu(bn(x) + residual) (relu if the layer has it). Its backward is
  // BackwardWithResidual, not Backward.
  Tensor ForwardWithResidual(ExecutionContext& ctx, const Tensor& x, const Tensor& residual);
  // Returns x's gradient and writes the residual's to *d_residual. The
  // weight and bias gradients are held until FinishHeldGradients, so that a
  // block can run its shortcut's backward in between: the shortcut's
  // parameters were registered later, so their gradients come first.
  Tensor BackwardWithResidual(ExecutionContext& ctx, const Tensor& dy, Tensor* d_residual);
  void FinishHeldGradients(ExecutionContext& ctx);
  // torchvision's zero_init_residual: this BN starts as the zero function.
  void set_zero_init(bool zero_init) { zero_init_ = zero_init; }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;
  void ResetOwnParameters(std::mt19937_64& rng) override;

 private:
  int64_t channels_;
  BatchNormParams params_;
  bool zero_init_ = false;
  bool relu_ = false;
  Parameter* weight_;
  Parameter* bias_;
  Buffer* running_mean_;
  Buffer* running_var_;
  Buffer* num_batches_tracked_;
  Tensor Normalize(ExecutionContext& ctx, const Tensor& x, const Tensor* residual);
  Tensor input_, output_, saved_mean_, saved_invstd_;
  Tensor held_dweight_, held_dbias_;
};

}  // namespace ddp
