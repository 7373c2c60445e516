// torch.nn.BatchNorm2d (and 1d over [N, C]): parameters "weight", "bias";
// buffers "running_mean", "running_var" and the 0-dimensional i64
// "num_batches_tracked". Momentum 0.1, eps 1e-5.
#pragma once

#include "runtime/layers/layer.h"
#include "runtime/ops/batch_norm.h"

namespace ddp {

class BatchNormLayer : public Layer {
 public:
  explicit BatchNormLayer(int64_t channels, BatchNormParams params = {});
  Parameter* weight() { return weight_; }
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
  Parameter* weight_;
  Parameter* bias_;
  Buffer* running_mean_;
  Buffer* running_var_;
  Buffer* num_batches_tracked_;
  Tensor input_, saved_mean_, saved_invstd_;
};

}  // namespace ddp
