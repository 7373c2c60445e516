#include "models/resnet.h"

#include "runtime/ops/elementwise.h"

namespace ddp {
namespace {

struct Stages {
  bool bottleneck;
  int blocks[4];
};

Stages StagesFor(int depth) {
  switch (depth) {
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    case 152: return {true, {3, 8, 36, 3}};
  }
  LOG(FATAL) << "no ResNet of depth " << depth;
}

Conv2dLayerOptions Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  Conv2dLayerOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel = kernel;
  o.stride = stride;
  o.padding = kernel / 2;
  return o;
}

}  // namespace

ResidualBlock::ResidualBlock(int64_t in_channels, int64_t planes, int64_t stride, bool bottleneck,
                             bool zero_init_residual) {
  // torchvision registers conv1, bn1, conv2, bn2[, conv3, bn3], relu,
  // downsample. Here each ReLU is fused into the batch norm before it; the
  // ReLUs hold no state, so the names are torchvision's all the same.
  const BatchNormParams bn;
  const bool relu = true;
  if (bottleneck) {
    out_channels_ = planes * 4;
    branch_ = {AddChild<Conv2dLayer>("conv1", Conv(in_channels, planes, 1, 1)),
               AddChild<BatchNormLayer>("bn1", planes, bn, relu),
               AddChild<Conv2dLayer>("conv2", Conv(planes, planes, 3, stride)),
               AddChild<BatchNormLayer>("bn2", planes, bn, relu),
               AddChild<Conv2dLayer>("conv3", Conv(planes, out_channels_, 1, 1))};
    last_bn_ = AddChild<BatchNormLayer>("bn3", out_channels_, bn, relu);
  } else {
    out_channels_ = planes;
    branch_ = {AddChild<Conv2dLayer>("conv1", Conv(in_channels, planes, 3, stride)),
               AddChild<BatchNormLayer>("bn1", planes, bn, relu),
               AddChild<Conv2dLayer>("conv2", Conv(planes, planes, 3, 1))};
    last_bn_ = AddChild<BatchNormLayer>("bn2", planes, bn, relu);
  }
  last_bn_->set_zero_init(zero_init_residual);
  if (stride != 1 || in_channels != out_channels_) {
    downsample_ = AddChild<Sequential>("downsample");
    downsample_->Append<Conv2dLayer>(Conv(in_channels, out_channels_, 1, stride));
    downsample_->Append<BatchNormLayer>(out_channels_);
  }
}

Tensor ResidualBlock::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  Tensor out = x;
  for (Layer* layer : branch_) out = layer->Forward(ctx, out);
  const Tensor identity = downsample_ ? downsample_->Forward(ctx, x) : x;
  return last_bn_->ForwardWithResidual(ctx, out, identity);
}

Tensor ResidualBlock::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  Tensor d_sum;  // the gradient of branch + shortcut, after the ReLU
  Tensor d = last_bn_->BackwardWithResidual(ctx, dy, &d_sum);
  // The downsample path before the last bn's parameters: they were
  // registered last, so the model's backward order stays the reverse of
  // registration.
  Tensor d_identity = d_sum;
  if (downsample_) {
    downsample_->set_needs_input_grad(needs_input_grad());
    d_identity = downsample_->Backward(ctx, d_sum);
  }
  last_bn_->FinishHeldGradients(ctx);
  branch_.front()->set_needs_input_grad(needs_input_grad());
  for (auto it = branch_.rbegin(); it != branch_.rend(); ++it) d = (*it)->Backward(ctx, d);
  if (!needs_input_grad()) return Tensor();
  Add(ctx, d, d_identity, d);
  return d;
}

ResNet::ResNet(const ResNetConfig& config) {
  const Stages stages = StagesFor(config.depth);
  AppendNamed<Conv2dLayer>("conv1", Conv(3, 64, 7, 2));
  AppendNamed<BatchNormLayer>("bn1", 64, BatchNormParams(), /*relu=*/true);
  AppendNamed<MaxPoolLayer>("maxpool", 3, 2, 1);
  int64_t channels = 64;
  for (int s = 0; s < 4; ++s) {
    Sequential* stage = AppendNamed<Sequential>("layer" + std::to_string(s + 1));
    stage->set_checkpointing(config.checkpoint_stages);
    const int64_t planes = int64_t{64} << s;
    for (int b = 0; b < stages.blocks[s]; ++b) {
      ResidualBlock* block = stage->Append<ResidualBlock>(channels, planes, (s > 0 && b == 0) ? 2 : 1,
                                                          stages.bottleneck, config.zero_init_residual);
      channels = block->out_channels();
    }
  }
  AppendNamed<GlobalAvgPoolLayer>("avgpool");
  AppendNamed<LinearLayer>("fc", channels, config.num_classes);
}

std::unique_ptr<Layer> BuildResNet(const ResNetConfig& config) { return std::make_unique<ResNet>(config); }

}  // namespace ddp
