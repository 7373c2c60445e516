#include "runtime/layers/sequential.h"

namespace ddp {

Tensor Sequential::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  Tensor h = x;
  for (Layer* layer : layers_) h = layer->Forward(ctx, h);
  return h;
}

Tensor Sequential::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  // Inner layers always pass a gradient on; only the first honours this
  // container's own needs_input_grad.
  layers_.front()->set_needs_input_grad(needs_input_grad());
  Tensor d = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) d = (*it)->Backward(ctx, d);
  return d;
}

}  // namespace ddp
