#include "runtime/layers/layer.h"

#include "runtime/ops/elementwise.h"
#include "runtime/timeline.h"

namespace ddp {
namespace {

constexpr int kGradientStagingSlot = ExecutionContext::kFirstLayerScratchSlot;

}  // namespace

Tensor Layer::Forward(ExecutionContext& ctx, const Tensor& x) {
  CHECK(x.defined()) << "Forward of an undefined tensor";
  const TimelineScope timed(ctx, name_, "forward");
  const ActivationScope activations(name_, "forward");
  PrepareForward();
  if (!checkpointing_ || !keeps_for_backward()) return ForwardImpl(ctx, x);
  // Keep the input only; inside an outer layer's recomputation this stays
  // a recomputation (no running statistics updated twice).
  const bool recomputing = recomputing_;
  checkpoint_input_ = x;
  SetCheckpointMode(/*keep_for_backward=*/false, recomputing);
  Tensor y = ForwardImpl(ctx, x);
  SetCheckpointMode(/*keep_for_backward=*/true, recomputing);
  return y;
}

void Layer::PrepareForward() {
  for (OwnParameter& own : params_) PrepareParameter(*own.param);
}

void Layer::PrepareParameter(const Parameter& p) {
  if (backward_state_ != nullptr && backward_state_->hook != nullptr) backward_state_->hook->PrepareParameter(p);
}

Tensor Layer::Backward(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(training_) << "Backward in evaluation mode";
  CHECK(dy.defined()) << "Backward of an undefined gradient";
  const TimelineScope timed(ctx, name_, "backward");
  const ActivationScope activations(name_, "backward");
  if (checkpointing_) {
    CHECK(checkpoint_input_.defined()) << "checkpointed layer: Backward without a training Forward";
    SetCheckpointMode(/*keep_for_backward=*/true, /*recomputing=*/true);
    PrepareForward();
    ForwardImpl(ctx, checkpoint_input_);
    SetCheckpointMode(true, false);
    checkpoint_input_ = Tensor();
  } else if (backward_reads_parameters()) {
    PrepareForward();  // ZeRO-3 gathers the parameters again for backward
  }
  return BackwardImpl(ctx, dy);
}

void Layer::SetTraining(bool training) {
  training_ = training;
  for (Named& c : children_) c.layer->SetTraining(training);
}

void Layer::SetCheckpointMode(bool keep_for_backward, bool recomputing) {
  keep_for_backward_ = keep_for_backward;
  recomputing_ = recomputing;
  for (Named& c : children_) c.layer->SetCheckpointMode(keep_for_backward, recomputing);
}

void Layer::CollectParameters(std::vector<Parameter*>* out) {
  for (OwnParameter& p : params_) out->push_back(p.param.get());
  for (Named& c : children_) c.layer->CollectParameters(out);
}

void Layer::CollectBuffers(std::vector<Buffer*>* out) {
  for (OwnBuffer& b : buffers_) out->push_back(b.buffer.get());
  for (Named& c : children_) c.layer->CollectBuffers(out);
}

void Layer::CollectState(std::vector<std::pair<std::string, Tensor>>* out) {
  for (OwnParameter& p : params_) out->emplace_back(p.param->name, p.param->value);
  for (OwnBuffer& b : buffers_) out->emplace_back(b.buffer->name, b.buffer->value);
  for (Named& c : children_) c.layer->CollectState(out);
}

void Layer::AssignNames(const std::string& prefix) {
  name_ = prefix.empty() ? "model" : prefix;
  auto join = [&](const std::string& local) { return prefix.empty() ? local : prefix + "." + local; };
  for (OwnParameter& p : params_) p.param->name = join(p.local_name);
  for (OwnBuffer& b : buffers_) b.buffer->name = join(b.local_name);
  for (Named& c : children_) c.layer->AssignNames(join(c.name));
}

void Layer::SetBackwardState(BackwardState* state) {
  backward_state_ = state;
  for (Named& c : children_) c.layer->SetBackwardState(state);
}

void Layer::ResetParameters(std::mt19937_64& rng) {
  ResetOwnParameters(rng);
  for (Named& c : children_) c.layer->ResetParameters(rng);
}

const Tensor& Layer::WeightsFor(const Parameter& p, const Tensor& x) {
  if (p.value.defined() && x.dtype() == p.value.dtype()) return p.value;
  CHECK(p.low.defined() && p.low.dtype() == x.dtype())
      << p.name << ": " << DTypeName(x.dtype()) << " input, but the model holds no " << DTypeName(x.dtype())
      << " copy of its weights here (Model::EnableLowPrecision; under ZeRO-3, PrepareParameter)";
  return p.low;
}

Parameter* Layer::AddParameter(const std::string& local_name, const Shape& shape, bool is_bias_or_norm) {
  auto p = std::make_unique<Parameter>();
  p->name = local_name;
  p->shape = shape;
  p->is_bias_or_norm = is_bias_or_norm;
  p->forward_reads_f32 = is_bias_or_norm;
  Parameter* raw = p.get();
  params_.push_back({local_name, std::move(p)});
  return raw;
}

Buffer* Layer::AddBuffer(const std::string& local_name, Tensor value) {
  auto b = std::make_unique<Buffer>();
  b->name = local_name;
  b->value = std::move(value);
  Buffer* raw = b.get();
  buffers_.push_back({local_name, std::move(b)});
  return raw;
}

Tensor Layer::GradientTarget(ExecutionContext& ctx, Parameter& p) {
  if (backward_state_ != nullptr && backward_state_->hook != nullptr) backward_state_->hook->PrepareGradient(p);
  CHECK(p.grad.defined()) << p.name << " has no gradient buffer: was the model finalized?";
  if (backward_state_ == nullptr || !backward_state_->accumulate) return p.grad;
  return ctx.ScratchTensor(kGradientStagingSlot, p.shape, DType::kF32);
}

void Layer::FinishGradient(ExecutionContext& ctx, Parameter& p, const Tensor& computed) {
  if (backward_state_ != nullptr && backward_state_->hook != nullptr) backward_state_->hook->PrepareGradient(p);
  if (!computed.SameData(p.grad)) {
    if (backward_state_ != nullptr && backward_state_->accumulate) {
      Axpy(ctx, 1.0f, computed, p.grad);
    } else {
      Copy(ctx, computed, p.grad);
    }
  }
  if (backward_state_ != nullptr && backward_state_->hook != nullptr) backward_state_->hook->MarkGradientReady(p);
}

}  // namespace ddp
