// Parameter-free layers: ReLU (in place, as torchvision's inplace=True),
// max pooling, and global average pooling with flatten ([N, C, H, W] ->
// [N, C], torchvision's avgpool + torch.flatten).
#pragma once

#include "runtime/layers/layer.h"
#include "runtime/ops/pooling.h"

namespace ddp {

class ReluLayer : public Layer {
 protected:
  // Overwrites x with max(x, 0) and returns it.
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  Tensor output_;
};

class MaxPoolLayer : public Layer {
 public:
  MaxPoolLayer(int64_t kernel, int64_t stride, int64_t padding);

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  Pool2dParams params_;
  Shape input_shape_;
  Tensor argmax_;
};

class GlobalAvgPoolLayer : public Layer {
 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  Shape input_shape_;
  MemoryFormat input_format_ = MemoryFormat::kContiguous;
};

}  // namespace ddp
