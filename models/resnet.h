// ResNet-18/34/50/101/152, v1.5 (the bottleneck's stride sits on its 3x3
// conv), with torchvision's module structure and therefore its parameter
// and buffer names ("layer1.0.downsample.1.running_mean", "fc.bias", ...).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/layers/batch_norm_layer.h"
#include "runtime/layers/conv2d_layer.h"
#include "runtime/layers/layer.h"
#include "runtime/layers/linear_layer.h"
#include "runtime/layers/sequential.h"
#include "runtime/layers/simple_layers.h"

namespace ddp {

struct ResNetConfig {
  int depth = 50;  // 18, 34, 50, 101 or 152
  int64_t num_classes = 1000;
  // torchvision's zero_init_residual: the last BN of each residual block
  // starts at zero, so every block starts as the identity.
  bool zero_init_residual = false;
  // Each stage (layer1..layer4) keeps only its input in forward and
  // recomputes in backward; batch norm updates its running statistics once.
  bool checkpoint_stages = false;
};

// conv-bn-relu twice (ResNet-18/34), or three times with a 4x wider output
// (Bottleneck, ResNet-50+), plus the identity or a 1x1 conv-bn downsample.
// Every bn-relu is one fused layer, and so is the block's last bn + add +
// relu (batch_norm.h's epilogues).
class ResidualBlock : public Layer {
 public:
  ResidualBlock(int64_t in_channels, int64_t planes, int64_t stride, bool bottleneck, bool zero_init_residual);
  int64_t out_channels() const { return out_channels_; }

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  int64_t out_channels_;
  // The residual branch in order: conv, bn + relu, ..., conv; then the last
  // bn, which adds the shortcut and applies the ReLU in one pass.
  std::vector<Layer*> branch_;
  BatchNormLayer* last_bn_;
  Sequential* downsample_ = nullptr;
};

// conv1, bn1 (with the relu fused), maxpool, layer1..layer4, avgpool (with flatten), fc.
class ResNet : public Sequential {
 public:
  explicit ResNet(const ResNetConfig& config);
};

std::unique_ptr<Layer> BuildResNet(const ResNetConfig& config);

}  // namespace ddp
