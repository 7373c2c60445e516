#include "comm/zero_parameters.h"

#include <algorithm>
#include <string>

#include "comm/watchdog.h"
#include "runtime/clock.h"
#include "runtime/ops/elementwise.h"

namespace ddp {

ShardedParameters::ShardedParameters(Communicator* comm, Model* model, const std::vector<BucketPlan>& plans,
                                     const std::vector<BucketGroup>& groups, int prefetch, const ExecutionContext& ctx)
    : comm_(comm), model_(model), ctx_(ctx), prefetch_(std::max(0, prefetch)) {
  const int world = comm->world_size(), rank = comm->rank();
  flat_offset_ = FlatOffsets(*model);
  for (const BucketPlan& plan : plans) {
    Bucket b;
    b.plan = plan;
    b.shard = ShardSize(plan.numel, world);
    b.owned = OwnedElements(plan.numel, world, rank);
    b.piece = Tensor::Zeros({b.shard}, DType::kF32, model->device());
    buckets_.push_back(std::move(b));
  }
  for (const BucketGroup& layout : groups) {
    Group g;
    g.layout = layout;
    groups_.push_back(std::move(g));
  }
}

ShardedParameters::~ShardedParameters() {
  // Gathers in flight still write into their groups' buffers.
  (void)Finish();
}

void ShardedParameters::Shard() {
  if (sharded_) return;
  const int rank = comm_->rank();
  for (Bucket& b : buckets_) {
    if (b.owned == 0) continue;
    Tensor mine = b.piece.View(0, {b.owned});
    Copy(ctx_, model_->flat_parameters().View(b.plan.offset + rank * b.shard, {b.owned}), mine);
  }
  model_->ReleaseFlatParameters(ctx_);
  sharded_ = true;
}

void ShardedParameters::SetPass(Pass pass) {
  pass_ = pass;
  last_ = -1;
}

void ShardedParameters::Demand(int k) {
  if (!sharded_) Shard();
  if (materialized_) return;  // every value views the materialized buffer
  Group& b = groups_[k];
  b.used = ++clock_;
  if (k == last_) {  // a layer's further parameter, or its backward
    Arrive(k);
    return;
  }
  const int step = direction();
  const bool in_order = last_ < 0 || k == last_ + step;
  // Back in order, what the pass has left behind goes: every bucket behind
  // the last one (which a layer straddling two buckets still reads), and
  // those read out of order since (one op may read several of them).
  if (in_order) {
    for (int j = 0; j < num_groups(); ++j) {
      if (j == k || j == last_ || !groups_[j].gathered.defined()) continue;
      if (groups_[j].jump || (last_ >= 0 && (j - last_) * step < 0)) Evict(j);
    }
  }
  b.jump = !in_order;
  if (!b.gathered.defined()) Launch(k);
  if (in_order) Prefetch(k);
  Arrive(k);
  last_ = k;
}

void ShardedParameters::Prefetch(int k) {
  const int step = direction();
  for (int d = 1; d <= prefetch_; ++d) {
    const int j = k + d * step;
    if (j < 0 || j >= num_groups()) break;
    groups_[j].used = ++clock_;
    if (!groups_[j].gathered.defined()) Launch(j);
  }
}

void ShardedParameters::Launch(int k) {
  // Room first (Demand evicts what the pass left behind, so this is a
  // bound only): the least recently used group but this one goes.
  while (resident_ >= prefetch_ + 3) {
    int oldest = -1;
    for (int j = 0; j < num_groups(); ++j) {
      if (j == k || !groups_[j].gathered.defined()) continue;
      if (oldest < 0 || groups_[j].used < groups_[oldest].used) oldest = j;
    }
    Evict(oldest);
  }
  Group& g = groups_[k];
  const BucketGroup& layout = g.layout;
  g.gathered = Tensor::Empty({layout.size}, DType::kF32, model_->device());
  for (int j = layout.first; j <= layout.last; ++j) {
    const Bucket& b = buckets_[j];
    g.work.push_back(Gather(j, "", g.gathered.View(b.plan.offset - layout.base, {b.shard * comm_->world_size()})));
  }
  for (int j = layout.first; j <= layout.last; ++j) {
    for (Parameter* p : buckets_[j].plan.params) p->value = g.gathered.View(flat_offset_.at(p) - layout.base, p->shape);
  }
  ++resident_;
  gathered_ += static_cast<int64_t>(g.gathered.nbytes());
  gathered_peak_ = std::max(gathered_peak_, gathered_);
}

std::shared_ptr<Work> ShardedParameters::Gather(int k, const std::string& why, Tensor whole) {
  const Bucket& b = buckets_[k];
  // In place: this rank's piece goes to its block first.
  Tensor mine = whole.View(comm_->rank() * b.shard, {b.shard});
  Copy(ctx_, b.piece, mine);
  const CollectiveLabel label("all-gather of parameter bucket " + std::to_string(k) + why);
  return comm_->AllGather(mine, whole);
}

void ShardedParameters::Arrive(int k) {
  Group& g = groups_[k];
  if (g.work.empty()) return;
  const double start = SteadySeconds();
  for (const std::shared_ptr<Work>& work : g.work) {
    const Status s = work->Wait();
    if (!s.ok() && status_.ok()) status_ = s;
  }
  waited_ += SteadySeconds() - start;
  g.work.clear();
}

void ShardedParameters::Evict(int k) {
  Group& g = groups_[k];
  Arrive(k);  // its gathers still write into the buffer
  for (int j = g.layout.first; j <= g.layout.last; ++j) {
    for (Parameter* p : buckets_[j].plan.params) p->value = Tensor();
  }
  gathered_ -= static_cast<int64_t>(g.gathered.nbytes());
  g.gathered = Tensor();
  g.jump = false;
  --resident_;
}

void ShardedParameters::EvictAll() {
  for (int k = 0; k < num_groups(); ++k) {
    if (groups_[k].gathered.defined()) Evict(k);
  }
}

void ShardedParameters::AfterUpdate() {
  if (!sharded_) Shard();
  EvictAll();
  Release();
  SetPass(Pass::kForward);
  const int top = num_groups() - 1;
  if (top < 0) return;
  groups_[top].used = ++clock_;
  Launch(top);
  Prefetch(top);
}

Status ShardedParameters::Finish() {
  for (int k = 0; k < num_groups(); ++k) Arrive(k);
  Status s = status_;
  status_ = Status::Ok();
  return s;
}

Status ShardedParameters::Materialize() {
  if (!sharded_) Shard();
  RETURN_IF_ERROR(Finish());
  if (materialized_) return Status::Ok();
  EvictAll();
  Tensor flat = Tensor::Empty({model_->num_parameters()}, DType::kF32, model_->device());
  for (int k = 0; k < static_cast<int>(buckets_.size()); ++k) {
    const Bucket& b = buckets_[k];
    // Padded to world x shard: gathered apart, then copied into place.
    Tensor whole = Tensor::Empty({b.shard * comm_->world_size()}, DType::kF32, model_->device());
    RETURN_IF_ERROR(Gather(k, " (every parameter)", whole)->Wait());
    Tensor place = flat.View(b.plan.offset, {b.plan.numel});
    Copy(ctx_, whole.View(0, {b.plan.numel}), place);
  }
  model_->AdoptFlatParameters(std::move(flat));
  materialized_ = true;
  return Status::Ok();
}

void ShardedParameters::Release() {
  if (!materialized_) return;
  model_->ReleaseFlatParameters(ctx_);
  materialized_ = false;
}

double ShardedParameters::TakeWaited() {
  const double w = waited_;
  waited_ = 0.0;
  return w;
}

int64_t ShardedParameters::piece_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += static_cast<int64_t>(b.piece.nbytes());
  return bytes;
}

}  // namespace ddp
