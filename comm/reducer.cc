#include "comm/reducer.h"

#include "comm/buckets.h"
#include "runtime/clock.h"

namespace ddp {
namespace {

void CastToWire(const Tensor& grads, Tensor& wire) {
  const float* g = grads.data<float>();
  const int64_t n = grads.numel();
  if (wire.dtype() == DType::kBF16) {
    BFloat16* w = wire.data<BFloat16>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) w[i] = FloatToBFloat16(g[i]);
  } else {
    Half* w = wire.data<Half>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) w[i] = FloatToHalf(g[i]);
  }
}

// grads = wire * scale: the wire held the sum over ranks.
void CastFromWire(const Tensor& wire, float scale, Tensor& grads) {
  float* g = grads.data<float>();
  const int64_t n = grads.numel();
  const float inv = scale;
  if (wire.dtype() == DType::kBF16) {
    const BFloat16* w = wire.data<BFloat16>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) g[i] = BFloat16ToFloat(w[i]) * inv;
  } else {
    const Half* w = wire.data<Half>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) g[i] = HalfToFloat(w[i]) * inv;
  }
}

}  // namespace

Reducer::Reducer(Communicator* comm, Model* model, const ReducerOptions& options)
    : comm_(comm), model_(model), options_(options) {
  CHECK(options.wire_dtype == DType::kF32 || options.wire_dtype == DType::kBF16 || options.wire_dtype == DType::kF16)
      << "wire dtype " << DTypeName(options.wire_dtype);
  expected_order_ = model->BackwardOrder();
  for (BucketPlan& plan : PlanBuckets(*model, options.first_bucket_mb, options.bucket_mb)) {
    Bucket b;
    b.params = std::move(plan.params);
    b.offset = plan.offset;
    b.numel = plan.numel;
    b.grads = model->flat_gradients().View(b.offset, {b.numel});
    if (options_.wire_dtype != DType::kF32) b.wire = Tensor::Empty({b.numel}, options_.wire_dtype);
    for (Parameter* p : b.params) bucket_of_[p] = static_cast<int>(buckets_.size());
    buckets_.push_back(std::move(b));
  }
  model->SetGradientReadyHook(this);
}

Reducer::~Reducer() { model_->SetGradientReadyHook(nullptr); }

void Reducer::PrepareForBackward(bool sync) {
  sync_ = sync;
  if (!sync) return;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.work.reset();
  }
  next_to_launch_ = 0;
  observed_order_.clear();
  backward_start_ = SteadySeconds();
  cast_seconds_ = 0.0;
}

void Reducer::MarkGradientReady(Parameter& param) {
  if (!sync_) return;
  if (!order_checked_) observed_order_.push_back(&param);
  auto it = bucket_of_.find(&param);
  CHECK(it != bucket_of_.end()) << "gradient-ready hook for " << param.name << ", which no bucket holds";
  Bucket& bucket = buckets_[it->second];
  CHECK_GT(bucket.pending, 0) << param.name << " marked ready twice in one backward";
  --bucket.pending;
  if (!options_.overlap) return;
  while (next_to_launch_ < static_cast<int>(buckets_.size()) && buckets_[next_to_launch_].pending == 0) {
    Launch(buckets_[next_to_launch_++]);
  }
}

void Reducer::Launch(Bucket& bucket) {
  bucket.launched = SteadySeconds() - backward_start_;
  if (options_.wire_dtype == DType::kF32) {
    bucket.work =
        comm_->AllReduce(bucket.grads, options_.gradients_prescaled ? ReduceOp::kSum : ReduceOp::kAverage);
    return;
  }
  const double start = SteadySeconds();
  CastToWire(bucket.grads, bucket.wire);
  cast_seconds_ += SteadySeconds() - start;
  bucket.work = comm_->AllReduce(bucket.wire, ReduceOp::kSum);
}

StatusOr<ReduceStats> Reducer::Wait() {
  CHECK(sync_) << "Reducer::Wait after a backward without sync";
  Status local;
  // Buckets not launched yet (no overlap, or a gradient never arrived) go
  // now, in order, so every rank still issues the same sequence.
  for (; next_to_launch_ < static_cast<int>(buckets_.size()); ++next_to_launch_) {
    Bucket& b = buckets_[next_to_launch_];
    if (b.pending != 0 && local.ok()) {
      local = Internal("bucket " + std::to_string(next_to_launch_) + " is missing " + std::to_string(b.pending) +
                       " gradient(s), e.g. of " + b.params.back()->name);
    }
    Launch(b);
  }
  ReduceStats stats;
  for (Bucket& b : buckets_) {
    const double start = SteadySeconds();
    RETURN_IF_ERROR(b.work->Wait());
    BucketTiming timing;
    timing.waited = SteadySeconds() - start;
    if (options_.wire_dtype != DType::kF32) {
      const double cast_start = SteadySeconds();
      CastFromWire(b.wire, options_.gradients_prescaled ? 1.0f : 1.0f / static_cast<float>(comm_->world_size()),
                   b.grads);
      cast_seconds_ += SteadySeconds() - cast_start;
    }
    timing.launched = b.launched;
    timing.finished = b.work->timing().finished - backward_start_;
    stats.exposed_seconds += timing.waited;
    stats.buckets.push_back(timing);
  }
  stats.exposed_seconds += cast_seconds_;
  sync_ = false;

  if (!order_checked_) {
    // The first synchronized backward: the observed order must be the static
    // one on every rank, decided together.
    order_checked_ = true;
    if (local.ok() && observed_order_ != expected_order_) {
      size_t i = 0;
      while (i < observed_order_.size() && i < expected_order_.size() && observed_order_[i] == expected_order_[i]) ++i;
      local = Internal("gradient-ready order differs from the static backward order at position " +
                       std::to_string(i) + ": expected " +
                       (i < expected_order_.size() ? expected_order_[i]->name : std::string("nothing")) + ", got " +
                       (i < observed_order_.size() ? observed_order_[i]->name : std::string("nothing")));
    }
    Tensor flag = Tensor::FromVector<int32_t>({local.ok() ? 0 : 1}, {1});
    RETURN_IF_ERROR(comm_->AllReduce(flag, ReduceOp::kSum)->Wait());
    if (!local.ok()) return local;
    if (flag.data<int32_t>()[0] != 0) {
      return Internal(std::to_string(flag.data<int32_t>()[0]) +
                      " other rank(s) saw gradients arrive out of the static backward order");
    }
  }
  if (!local.ok()) return local;
  return stats;
}

}  // namespace ddp
