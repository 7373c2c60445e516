// torch.nn.Conv2d: parameters "weight" [out, in / groups, k, k] and, with
// bias, "bias" [out]. Keeps its input for backward.
#pragma once

#include "runtime/layers/layer.h"
#include "runtime/ops/conv2d.h"

namespace ddp {

struct Conv2dLayerOptions {
  int64_t in_channels = 0, out_channels = 0, kernel = 1;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = false;
};

class Conv2dLayer : public Layer {
 public:
  explicit Conv2dLayer(const Conv2dLayerOptions& options);
  Parameter* weight() { return weight_; }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;
  // torchvision's ResNet init: kaiming normal, fan_out, ReLU gain.
  void ResetOwnParameters(std::mt19937_64& rng) override;

 private:
  Conv2dLayerOptions options_;
  Conv2dParams params_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  Tensor input_;
};

}  // namespace ddp
