#include "comm/reducer.h"

#include <algorithm>

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
  int64_t largest = 0;
  for (BucketPlan& plan : plans) {
    Bucket b{std::move(plan)};
    b.grads = model->flat_gradients().View(b.offset, {b.numel});
    largest = std::max(largest, b.numel);
    buckets_.push_back(std::move(b));
  }
  if (options_.wire_dtype != DType::kF32) {
    for (int k = 0; k < kWireBuffers; ++k) {
      wire_pool_.push_back(Tensor::Empty({largest}, options_.wire_dtype, model->flat_gradients().device()));
    }
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
  timings_.assign(buckets_.size(), BucketTiming());
  next_to_finish_ = 0;
  deferred_ = Status::Ok();
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
  // Its wire buffer is free once the bucket that used it before arrived.
  const int k = static_cast<int>(&bucket - buckets_.data());
  while (next_to_finish_ <= k - kWireBuffers) {
    const Status s = Finish(next_to_finish_++);
    if (!s.ok() && deferred_.ok()) deferred_ = s;
  }
  bucket.wire = wire_pool_[k % kWireBuffers].View(0, {bucket.numel});
  const double start = SteadySeconds();
  CastScaled(options_.ctx, bucket.grads, 1.0f, bucket.wire);
  cast_seconds_ += SteadySeconds() - start;
  bucket.work = comm_->AllReduce(bucket.wire, ReduceOp::kSum);
}

Status Reducer::Finish(int k) {
  Bucket& b = buckets_[k];
  BucketTiming& timing = timings_[k];
  const double start = SteadySeconds();
  RETURN_IF_ERROR(b.work->Wait());
  timing.waited = SteadySeconds() - start;
  if (options_.wire_dtype != DType::kF32) {
    const double cast_start = SteadySeconds();
    // The wire held the sum over ranks.
    CastScaled(options_.ctx, b.wire,
               options_.gradients_prescaled ? 1.0f : 1.0f / static_cast<float>(comm_->world_size()), b.grads);
    cast_seconds_ += SteadySeconds() - cast_start;
    b.wire = Tensor();
  }
  timing.launched = b.launched;
  timing.finished = FinishedAfter(*b.work, backward_start_);
  return Status::Ok();
}

int64_t Reducer::wire_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& t : wire_pool_) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

StatusOr<ReduceStats> Reducer::Wait() {
  CHECK(sync_) << "Reducer::Wait after a backward without sync";
  Status local = schedule_->CheckComplete();
  // Buckets not launched yet (no overlap, or a gradient never arrived) go
  // now, in order, so every rank still issues the same sequence.
  for (int k = schedule_->TakeNext(); k >= 0; k = schedule_->TakeNext()) Launch(buckets_[k]);
  if (local.ok()) local = deferred_;  // a bucket that failed while backward reused its wire buffer
  for (; next_to_finish_ < static_cast<int>(buckets_.size()); ++next_to_finish_) {
    // A later bucket's failure follows from an earlier one's: the first is
    // reported.
    const Status s = Finish(next_to_finish_);
    if (!s.ok()) return local.ok() ? s : local;
  }
  ReduceStats stats;
  stats.buckets = timings_;
  for (const BucketTiming& t : timings_) stats.exposed_seconds += t.waited;
  stats.exposed_seconds += cast_seconds_;
  stats.backward_start = backward_start_;
  sync_ = false;
  // The first synchronized backward: the observed order must be the static
  // one on every rank, decided together.
  RETURN_IF_ERROR(schedule_->FinishBackward(comm_, local));
  return stats;
}

}  // namespace ddp
