#include "launch/gradient_sync.h"

#include <cmath>

#include "runtime/ops/reduce.h"

namespace ddp {

GradientSync::GradientSync(Communicator* comm, Model* model, const GradientSyncOptions& options,
                           const ExecutionContext& ctx)
    : comm_(comm), model_(model), options_(options) {
  if (comm_ != nullptr && options_.zero_stage >= 1) {
    // ZeRO: gradients move into padded bucket buffers, and the optimizer
    // sees only this rank's pieces.
    ZeroOptions zero;
    static_cast<BucketOptions&>(zero) = options_;  // the bucketing, as given
    zero.stage = options_.zero_stage;
    zero.gather_dtype = options_.gather_dtype;
    zero.prefetch = options_.zero_prefetch;
    zero.ctx = ctx;
    zero_ = std::make_unique<ZeroReducer>(comm_, model_, zero);
    return;
  }
  for (Parameter* p : model_->parameters()) grads_.push_back(p->grad);
  if (comm_ != nullptr) {
    ReducerOptions reducer;
    static_cast<BucketOptions&>(reducer) = options_;
    reducer.gradients_prescaled = true;  // the step divides the loss gradient by the world size
    reducer.ctx = ctx;
    reducer_ = std::make_unique<Reducer>(comm_, model_, reducer);
  }
}

std::vector<OptimizerSlot> GradientSync::OptimizerSlots(
    const std::function<float(const Parameter&)>& weight_decay) const {
  if (zero_) return zero_->OptimizerSlots(weight_decay);
  std::vector<OptimizerSlot> slots;
  int index = 0;
  for (Parameter* p : model_->parameters()) slots.push_back({p->name, p->value, p->grad, weight_decay(*p), index++});
  return slots;
}

AllReduceSum GradientSync::NormAllReduce() const {
  if (!zero_) return nullptr;
  Communicator* comm = comm_;
  return [comm](Tensor& t) { return comm->AllReduce(t, ReduceOp::kSum)->Wait(); };
}

void GradientSync::PrepareForBackward(int64_t micro, int64_t micro_batches) {
  const bool last = micro == micro_batches - 1;
  if (reducer_) reducer_->PrepareForBackward(/*sync=*/last);
  if (zero_) zero_->PrepareForBackward(/*sync=*/reduces_each_micro_batch() || last, /*first_micro_batch=*/micro == 0);
}

StatusOr<double> GradientSync::WaitMicroBatch(int64_t micro, int64_t micro_batches) {
  if (!reduces_each_micro_batch() || micro == micro_batches - 1) return 0.0;
  ASSIGN_OR_RETURN(const ReduceStats stats, zero_->Wait());
  return stats.exposed_seconds;
}

StatusOr<ReduceStats> GradientSync::Wait(bool graphed) {
  if (zero_) return zero_->Wait();
  if (reducer_ && !graphed) return reducer_->Wait();
  return ReduceStats();
}

std::vector<Tensor> GradientSync::Held() const {
  if (zero_) return zero_->GradientPieces();
  return {model_->flat_gradients()};
}

bool GradientSync::HeldFinite(ExecutionContext& ctx) const {
  for (const Tensor& g : Held()) {
    if (!AllFinite(ctx, g)) return false;
  }
  return true;
}

std::string GradientSync::FirstNonFinite(ExecutionContext& ctx) const {
  if (zero_) {
    for (const OptimizerSlot& slot : zero_->OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      if (slot.grad.numel() > 0 && !AllFinite(ctx, slot.grad)) return slot.name;
    }
    return "?";
  }
  for (Parameter* p : model_->parameters()) {
    if (!AllFinite(ctx, p->grad)) return p->name;
  }
  return "?";
}

Status GradientSync::ClipToNorm(ExecutionContext& ctx, double max_norm) {
  double squared = 0.0;
  if (zero_) {
    ASSIGN_OR_RETURN(squared, zero_->GlobalGradientSquaredNorm(ctx));
  } else {
    squared = GradientSquaredNorm(ctx, grads_);
  }
  ClipGradientsToNorm(ctx, zero_ ? zero_->GradientPieces() : grads_, std::sqrt(squared), max_norm);
  return Status::Ok();
}

Status GradientSync::AfterUpdate(ExecutionContext& ctx) {
  // The updated pieces travel while the next step loads data and runs its
  // forward, which waits for each bucket as it reaches its parameters (and
  // rounds it into the low-precision copy there).
  if (zero_) return zero_->LaunchParameterGather();
  model_->RefreshLowPrecision(ctx);
  return Status::Ok();
}

Status GradientSync::FinishGather() { return zero_ ? zero_->FinishParameterGather() : Status::Ok(); }

Status GradientSync::GatherMasterWeights() { return zero_ ? zero_->GatherMasterWeights() : Status::Ok(); }

void GradientSync::ReleaseMasterWeights() {
  if (zero_) zero_->ReleaseMasterWeights();
}

Status GradientSync::ShardParameters(bool from_root) {
  return zero_ ? zero_->ShardParameters(from_root) : Status::Ok();
}

int64_t GradientSync::master_bytes() const {
  return zero_ ? zero_->master_bytes() : static_cast<int64_t>(model_->flat_parameters().nbytes());
}

std::vector<Tensor> GradientSync::MasterWeights() const {
  if (!zero_) return {model_->flat_parameters()};
  std::vector<Tensor> pieces;
  for (const OptimizerSlot& slot : zero_->OptimizerSlots([](const Parameter&) { return 0.0f; })) {
    pieces.push_back(slot.value);
  }
  return pieces;
}

int64_t GradientSync::gradient_bytes() const {
  return zero_ ? zero_->gradient_bytes() : static_cast<int64_t>(model_->flat_gradients().nbytes());
}

}  // namespace ddp
