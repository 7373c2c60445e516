#include "comm/zero_reducer.h"

#include <chrono>

#include "comm/buckets.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/reduce.h"

namespace ddp {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ZeroReducer::ZeroReducer(Communicator* comm, Model* model, const ZeroOptions& options)
    : comm_(comm), model_(model), options_(options) {
  const int world = comm->world_size(), rank = comm->rank();
  int64_t running = 0;
  for (Parameter* p : model->parameters()) {
    flat_offset_[p] = running;
    running += p->value.numel();
  }
  for (BucketPlan& plan : PlanBuckets(*model, options.first_bucket_mb, options.bucket_mb)) {
    Bucket b;
    b.params = std::move(plan.params);
    b.offset = plan.offset;
    b.numel = plan.numel;
    b.shard = (b.numel + world - 1) / world;
    b.owned = std::max<int64_t>(0, std::min(b.shard, b.numel - rank * b.shard));
    b.grads = Tensor::Zeros({b.shard * world}, DType::kF32);
    for (Parameter* p : b.params) {
      p->grad = b.grads.View(flat_offset_[p] - b.offset, p->shape);
      bucket_of_[p] = static_cast<int>(buckets_.size());
    }
    buckets_.push_back(std::move(b));
  }
  model->ReleaseFlatGradients();
  model->SetGradientReadyHook(this);
}

ZeroReducer::~ZeroReducer() { model_->SetGradientReadyHook(nullptr); }

std::vector<OptimizerSlot> ZeroReducer::OptimizerSlots(
    const std::function<float(const Parameter&)>& weight_decay) const {
  std::vector<OptimizerSlot> slots;
  const int64_t rank = comm_->rank();
  for (const Bucket& b : buckets_) {
    // This rank's piece, in bucket coordinates: [lo, hi).
    const int64_t lo = rank * b.shard, hi = lo + b.owned;
    for (Parameter* p : b.params) {
      const int64_t start = flat_offset_.at(p) - b.offset, end = start + p->value.numel();
      const int64_t a = std::max(lo, start), z = std::min(hi, end);
      if (a >= z) continue;
      slots.push_back({p->name, model_->flat_parameters().View(b.offset + a, {z - a}), b.grads.View(a, {z - a}),
                       weight_decay(*p)});
    }
  }
  return slots;
}

void ZeroReducer::PrepareForBackward(bool sync) {
  sync_ = sync;
  if (!sync) return;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.work.reset();
  }
  next_to_launch_ = 0;
  backward_start_ = Now();
}

void ZeroReducer::MarkGradientReady(Parameter& param) {
  if (!sync_) return;
  Bucket& bucket = buckets_[bucket_of_.at(&param)];
  CHECK_GT(bucket.pending, 0) << param.name << " marked ready twice in one backward";
  --bucket.pending;
  if (!options_.overlap) return;
  while (next_to_launch_ < static_cast<int>(buckets_.size()) && buckets_[next_to_launch_].pending == 0) {
    Launch(buckets_[next_to_launch_++]);
  }
}

void ZeroReducer::Launch(Bucket& bucket) {
  bucket.launched = Now() - backward_start_;
  bucket.scattered = Tensor::Empty({bucket.shard}, DType::kF32);
  bucket.work = comm_->ReduceScatter(bucket.grads, bucket.scattered, ReduceOp::kSum);
}

StatusOr<ReduceStats> ZeroReducer::Wait() {
  CHECK(sync_) << "ZeroReducer::Wait after a backward without sync";
  Status local;
  for (; next_to_launch_ < static_cast<int>(buckets_.size()); ++next_to_launch_) {
    Bucket& b = buckets_[next_to_launch_];
    if (b.pending != 0 && local.ok()) {
      local = Internal("bucket " + std::to_string(next_to_launch_) + " is missing " + std::to_string(b.pending) +
                       " gradient(s)");
    }
    Launch(b);
  }
  ReduceStats stats;
  for (Bucket& b : buckets_) {
    const double start = Now();
    RETURN_IF_ERROR(b.work->Wait());
    BucketTiming timing;
    timing.waited = Now() - start;
    timing.launched = b.launched;
    timing.finished = b.work->timing().finished - backward_start_;
    // The summed piece goes back in place, where the optimizer slots view it.
    Tensor owned = OwnedGradients(b);
    owned.CopyFrom(b.scattered.View(0, {b.owned}));
    b.scattered = Tensor();
    stats.exposed_seconds += timing.waited;
    stats.buckets.push_back(timing);
  }
  sync_ = false;
  if (!local.ok()) return local;
  return stats;
}

StatusOr<double> ZeroReducer::GlobalGradientSquaredNorm(ExecutionContext& ctx) {
  double local = 0.0;
  for (const Bucket& b : buckets_) local += SumOfSquares(ctx, OwnedGradients(b));
  Tensor sum = Tensor::FromVector<double>({local}, {1});
  RETURN_IF_ERROR(comm_->AllReduce(sum, ReduceOp::kSum)->Wait());
  return sum.data<double>()[0];
}

void ZeroReducer::ScaleGradients(ExecutionContext& ctx, float scale) {
  for (const Bucket& b : buckets_) {
    Tensor owned = OwnedGradients(b);
    Scale(ctx, scale, owned);
  }
}

Status ZeroReducer::AllGatherParameters() {
  const int64_t rank = comm_->rank();
  std::vector<Tensor> gathered(buckets_.size());
  std::vector<std::shared_ptr<Work>> works(buckets_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    Tensor piece = Tensor::Zeros({b.shard}, DType::kF32);
    Tensor mine = piece.View(0, {b.owned});
    mine.CopyFrom(model_->flat_parameters().View(b.offset + rank * b.shard, {b.owned}));
    gathered[k] = Tensor::Empty({b.shard * comm_->world_size()}, DType::kF32);
    works[k] = comm_->AllGather(piece, gathered[k]);
  }
  // Copy each bucket back as soon as it arrives, while later ones travel.
  for (size_t k = 0; k < buckets_.size(); ++k) {
    RETURN_IF_ERROR(works[k]->Wait());
    const Bucket& b = buckets_[k];
    Tensor params = model_->flat_parameters().View(b.offset, {b.numel});
    params.CopyFrom(gathered[k].View(0, {b.numel}));
  }
  return Status::Ok();
}

int64_t ZeroReducer::gradient_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += static_cast<int64_t>(b.grads.nbytes());
  return bytes;
}

}  // namespace ddp
