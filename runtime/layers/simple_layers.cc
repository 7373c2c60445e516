#include "runtime/layers/simple_layers.h"

#include "runtime/ops/elementwise.h"

namespace ddp {

Tensor ReluLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  Tensor y = x;
  ReluForward(ctx, x, y);
  if (keeps_for_backward()) output_ = y;
  return y;
}

Tensor ReluLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(output_.defined()) << "ReLU: Backward without a training Forward";
  Tensor dx;
  if (needs_input_grad()) {
    dx = Tensor::EmptyLike(dy);
    ReluBackward(ctx, output_, dy, dx);
  }
  output_ = Tensor();
  return dx;
}

MaxPoolLayer::MaxPoolLayer(int64_t kernel, int64_t stride, int64_t padding) {
  params_.kernel_h = params_.kernel_w = kernel;
  params_.stride_h = params_.stride_w = stride;
  params_.pad_h = params_.pad_w = padding;
}

Tensor MaxPoolLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  const Shape ys = Pool2dOutputShape(x.shape(), params_);
  Tensor y = Tensor::Empty(ys, x.dtype(), x.device(), x.format());
  Tensor argmax = Tensor::Empty(ys, DType::kI32, x.device());
  MaxPool2dForward(ctx, params_, x, y, argmax);
  if (keeps_for_backward()) {
    argmax_ = argmax;
    input_shape_ = x.shape();
  }
  return y;
}

Tensor MaxPoolLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(argmax_.defined()) << "MaxPool: Backward without a training Forward";
  Tensor dx;
  if (needs_input_grad()) {
    dx = Tensor::Empty(input_shape_, dy.dtype(), dy.device(), dy.format());
    MaxPool2dBackward(ctx, params_, dy, argmax_, dx);
  }
  argmax_ = Tensor();
  return dx;
}

Tensor GlobalAvgPoolLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  Tensor y = Tensor::Empty({x.dim(0), x.dim(1)}, x.dtype(), x.device());
  GlobalAvgPoolForward(ctx, x, y);
  input_shape_ = x.shape();
  input_format_ = x.format();
  return y;
}

Tensor GlobalAvgPoolLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  if (!needs_input_grad()) return Tensor();
  Tensor dx = Tensor::Empty(input_shape_, dy.dtype(), dy.device(), input_format_);
  GlobalAvgPoolBackward(ctx, dy, dx);
  return dx;
}

}  // namespace ddp
