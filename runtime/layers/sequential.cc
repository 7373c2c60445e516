#include "runtime/layers/sequential.h"

namespace ddp {

Tensor Sequential::RunChildren(ExecutionContext& ctx, const Tensor& x) {
  Tensor h = x;
  for (Layer* layer : layers_) h = layer->Forward(ctx, h);
  return h;
}

Tensor Sequential::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  if (!checkpointing_ || !keeps_for_backward()) return RunChildren(ctx, x);
  checkpoint_input_ = x;
  for (Layer* layer : layers_) layer->SetCheckpointMode(/*keep_for_backward=*/false, /*recomputing=*/false);
  Tensor y = RunChildren(ctx, x);
  for (Layer* layer : layers_) layer->SetCheckpointMode(true, false);
  return y;
}

Tensor Sequential::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  if (checkpointing_) {
    CHECK(checkpoint_input_.defined()) << "checkpointed Sequential: Backward without a training Forward";
    for (Layer* layer : layers_) layer->SetCheckpointMode(/*keep_for_backward=*/true, /*recomputing=*/true);
    RunChildren(ctx, checkpoint_input_);
    for (Layer* layer : layers_) layer->SetCheckpointMode(true, false);
    checkpoint_input_ = Tensor();
  }
  // Inner layers always pass a gradient on; only the first honours this
  // container's own needs_input_grad.
  layers_.front()->set_needs_input_grad(needs_input_grad());
  Tensor d = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) d = (*it)->Backward(ctx, d);
  return d;
}

}  // namespace ddp
