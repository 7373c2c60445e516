#include "comm/reducer.h"

#include "comm/buckets.h"
#include "comm/watchdog.h"
#include "runtime/ops/elementwise.h"
#include "runtime/clock.h"

namespace ddp {
Reducer::Reducer(Communicator* comm, Model* model, const ReducerOptions& options)
    : comm_(comm), model_(model), options_(options) {
  CHECK(options.wire_dtype == DType::kF32 || options.wire_dtype == DType::kBF16 || options.wire_dtype == DType::kF16)
      << "wire dtype " << DTypeName(options.wire_dtype);
  std::vector<BucketPlan> plans = PlanBuckets(*model, options.first_bucket_mb, options.bucket_mb);
  schedule_ = std::make_unique<BucketSchedule>(*model, plans);
  for (BucketPlan& plan : plans) {
    Bucket b{std::move(plan)};
    b.grads = model->flat_gradients().View(b.offset, {b.numel});
    if (options_.wire_dtype != DType::kF32) b.wire = Tensor::Empty({b.numel}, options_.wire_dtype, b.grads.device());
    buckets_.push_back(std::move(b));
  }
  model->SetGradientReadyHook(this);
}

Reducer::~Reducer() { model_->SetGradientReadyHook(nullptr); }

void Reducer::PrepareForBackward(bool sync) {
  sync_ = sync;
  if (!sync) return;
  for (Bucket& b : buckets_) b.work.reset();
  schedule_->Reset();
  backward_start_ = SteadySeconds();
  cast_seconds_ = 0.0;
}

void Reducer::MarkGradientReady(Parameter& param) {
  if (sync_) schedule_->MarkGradientReady(param, options_.overlap, [this](int k) { Launch(buckets_[k]); });
}

void Reducer::Launch(Bucket& bucket) {
  bucket.launched = SteadySeconds() - backward_start_;
  const CollectiveLabel label("all-reduce of gradient bucket " + std::to_string(&bucket - buckets_.data()));
  if (options_.wire_dtype == DType::kF32) {
    bucket.work =
        comm_->AllReduce(bucket.grads, options_.gradients_prescaled ? ReduceOp::kSum : ReduceOp::kAverage);
    return;
  }
  const double start = SteadySeconds();
  CastScaled(options_.ctx, bucket.grads, 1.0f, bucket.wire);
  cast_seconds_ += SteadySeconds() - start;
  bucket.work = comm_->AllReduce(bucket.wire, ReduceOp::kSum);
}

StatusOr<ReduceStats> Reducer::Wait() {
  CHECK(sync_) << "Reducer::Wait after a backward without sync";
  const Status local = schedule_->CheckComplete();
  // Buckets not launched yet (no overlap, or a gradient never arrived) go
  // now, in order, so every rank still issues the same sequence.
  for (int k = schedule_->TakeNext(); k >= 0; k = schedule_->TakeNext()) Launch(buckets_[k]);
  ReduceStats stats;
  for (Bucket& b : buckets_) {
    const double start = SteadySeconds();
    RETURN_IF_ERROR(b.work->Wait());
    BucketTiming timing;
    timing.waited = SteadySeconds() - start;
    if (options_.wire_dtype != DType::kF32) {
      const double cast_start = SteadySeconds();
      // The wire held the sum over ranks.
      CastScaled(options_.ctx, b.wire,
                 options_.gradients_prescaled ? 1.0f : 1.0f / static_cast<float>(comm_->world_size()), b.grads);
      cast_seconds_ += SteadySeconds() - cast_start;
    }
    timing.launched = b.launched;
    timing.finished = FinishedAfter(*b.work, backward_start_);
    stats.exposed_seconds += timing.waited;
    stats.buckets.push_back(timing);
  }
  stats.exposed_seconds += cast_seconds_;
  stats.backward_start = backward_start_;
  sync_ = false;

  // The first synchronized backward: the observed order must be the static
  // one on every rank, decided together.
  RETURN_IF_ERROR(schedule_->FinishBackward(comm_, local));
  return stats;
}

}  // namespace ddp
