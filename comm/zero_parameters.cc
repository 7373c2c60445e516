#include "comm/zero_parameters.h"

#include <algorithm>
#include <string>

#include "comm/watchdog.h"
#include "runtime/clock.h"
#include "runtime/ops/elementwise.h"

namespace ddp {

F32Reads F32Reads::Plan(const BucketPlan& plan, int64_t piece_shard, int world,
                        const std::unordered_map<const Parameter*, int64_t>& offsets) {
  F32Reads reads;
  reads.runs.assign(world, {});
  for (int r = 0; r < world; ++r) {
    const int64_t lo = r * piece_shard, hi = std::min(plan.numel, lo + piece_shard);
    int64_t packed = 0;
    for (const Parameter* p : plan.params) {
      if (!p->forward_reads_f32) continue;  // read through the 16-bit copy
      const int64_t start = offsets.at(p) - plan.offset, end = start + NumElements(p->shape);
      const int64_t a = std::max(lo, start), z = std::min(hi, end);
      if (a >= z) continue;
      reads.runs[r].push_back({a, z - a, packed, p, a - start});
      packed += z - a;
    }
    reads.shard = std::max(reads.shard, packed);
  }
  return reads;
}

void F32Reads::Pack(ExecutionContext& ctx, int rank, int64_t piece_shard, const Tensor& piece, Tensor block) const {
  for (const Run& run : runs[rank]) {
    Tensor packed = block.View(run.packed_offset, {run.length});
    Copy(ctx, piece.View(run.bucket_offset - rank * piece_shard, {run.length}), packed);
  }
}

std::shared_ptr<Work> F32Reads::Gather(ExecutionContext& ctx, Communicator* comm, int64_t piece_shard,
                                       const Tensor& piece, Tensor* all) const {
  const int rank = comm->rank();
  *all = Tensor::Empty({shard * comm->world_size()}, DType::kF32, piece.device());
  Tensor mine = all->View(rank * shard, {shard});
  Pack(ctx, rank, piece_shard, piece, mine);
  return comm->AllGather(mine, *all);
}

void F32Reads::Unpack(ExecutionContext& ctx, const Tensor& all) const {
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const Run& run : runs[r]) {
      Tensor value = run.param->value.View(run.param_offset, {run.length});
      Copy(ctx, all.View(static_cast<int64_t>(r) * shard + run.packed_offset, {run.length}), value);
    }
  }
}

ShardedParameters::ShardedParameters(Communicator* comm, Model* model, const std::vector<BucketPlan>& plans,
                                     const std::vector<BucketGroup>& groups, bool working_too, int prefetch,
                                     const ExecutionContext& ctx)
    : comm_(comm), model_(model), ctx_(ctx), prefetch_(std::max(0, prefetch)), working_too_(working_too) {
  const int world = comm->world_size(), rank = comm->rank();
  if (working_too) low_ = model->compute_dtype();
  flat_offset_ = FlatOffsets(*model);
  for (const BucketPlan& plan : plans) {
    Bucket b;
    b.plan = plan;
    b.shard = ShardSize(plan.numel, world);
    b.owned = OwnedElements(plan.numel, world, rank);
    b.piece = Tensor::Zeros({b.shard}, DType::kF32, model->device());
    if (low()) b.f32_reads = F32Reads::Plan(plan, b.shard, world, flat_offset_);
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

Status ShardedParameters::Shard(bool from_root) {
  if (sharded_) return Status::Ok();
  const int rank = comm_->rank();
  const Tensor& flat = model_->flat_parameters();
  const Device device = model_->device();
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, b.plan.numel);
  // Where the flat parameters stayed on the host: a bucket at a time on the
  // device.
  Tensor staging = flat.device() != device && from_root ? Tensor::Empty({largest}, DType::kF32, device) : Tensor();
  Status status;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    Tensor values = flat.View(b.plan.offset, {b.plan.numel});
    if (from_root) {
      if (staging.defined()) {
        Tensor staged = staging.View(0, {b.plan.numel});
        if (rank == 0) staged.CopyFrom(values);  // the others receive it
        values = staged;
      }
      const CollectiveLabel label("start-up broadcast of bucket " + std::to_string(k) + "'s parameters");
      // Every bucket goes round, so no rank leaves the others in a
      // collective; the first failure is reported.
      const Status sent = comm_->Broadcast(values, 0)->Wait();
      if (status.ok()) status = sent;
    }
    if (b.owned == 0) continue;
    Tensor mine = b.piece.View(0, {b.owned});
    const Tensor own = values.View(rank * b.shard, {b.owned});
    if (own.device() == device) {
      Copy(ctx_, own, mine);
    } else {
      mine.CopyFrom(own);  // from the host, without a staging bucket (no broadcast)
    }
  }
  RETURN_IF_ERROR(status);
  model_->ReleaseFlatParameters(ctx_, /*keep_working_copy=*/!working_too_);
  sharded_ = true;
  return Status::Ok();
}

void ShardedParameters::SetPass(Pass pass) {
  pass_ = pass;
  last_ = -1;
}

void ShardedParameters::Demand(int k) {
  if (!sharded_) (void)Shard();  // no broadcast: nothing to fail
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
  const int world = comm_->world_size();
  g.gathered = Tensor::Empty({layout.size}, low() ? low_ : DType::kF32, model_->device());
  for (int j = layout.first; j <= layout.last; ++j) {
    Bucket& b = buckets_[j];
    g.work.push_back(Gather(j, "", g.gathered.View(b.plan.offset - layout.base, {b.shard * world})));
    if (b.f32_reads.shard == 0) continue;
    // The f32-read parameters' elements beside it, unpacked by Place.
    const CollectiveLabel label("all-gather of parameter bucket " + std::to_string(j) + " (f32 reads)");
    g.work.push_back(b.f32_reads.Gather(ctx_, comm_, b.shard, b.piece, &b.extras));
  }
  if (!low()) {
    for (int j = layout.first; j <= layout.last; ++j) {
      for (Parameter* p : buckets_[j].plan.params) p->value = g.gathered.View(flat_offset_.at(p) - layout.base, p->shape);
    }
  }
  ++resident_;
  gathered_ += GroupBytes(g);
  gathered_peak_ = std::max(gathered_peak_, gathered_);
}

void ShardedParameters::Place(int k) {
  Group& g = groups_[k];
  const BucketGroup& layout = g.layout;
  const int64_t before = GroupBytes(g);
  // A split parameter is in each of its group's buckets.
  std::vector<Parameter*> params;
  for (int j = layout.first; j <= layout.last; ++j) {
    for (Parameter* p : buckets_[j].plan.params) {
      if (std::find(params.begin(), params.end(), p) == params.end()) params.push_back(p);
    }
  }
  int64_t f32_elements = 0;
  for (const Parameter* p : params) f32_elements += p->forward_reads_f32 ? NumElements(p->shape) : 0;
  g.f32_values = Tensor::Empty({f32_elements}, DType::kF32, model_->device());
  int64_t at = 0;
  for (Parameter* p : params) {
    const Tensor copy = g.gathered.View(flat_offset_.at(p) - layout.base, p->shape);
    if (model_->LowPrecisionFormat(*p) == MemoryFormat::kChannelsLast) {
      g.rearranged.push_back(Tensor::Empty(p->shape, low_, model_->device(), MemoryFormat::kChannelsLast));
      ConvertLayout(ctx_, copy, g.rearranged.back());
      p->low = g.rearranged.back();
    } else {
      p->low = copy;
    }
    if (!p->forward_reads_f32) continue;
    p->value = g.f32_values.View(at, p->shape);
    at += NumElements(p->shape);
  }
  // Counted while the extras are still held beside their values.
  gathered_ += GroupBytes(g) - before;
  gathered_peak_ = std::max(gathered_peak_, gathered_);
  const int64_t placed = GroupBytes(g);
  for (int j = layout.first; j <= layout.last; ++j) {
    Bucket& b = buckets_[j];
    if (!b.extras.defined()) continue;
    b.f32_reads.Unpack(ctx_, b.extras);
    b.extras = Tensor();
  }
  g.placed = true;
  gathered_ += GroupBytes(g) - placed;
}

int64_t ShardedParameters::GroupBytes(const Group& g) const {
  int64_t bytes = static_cast<int64_t>(g.gathered.nbytes() + g.f32_values.nbytes());
  for (const Tensor& t : g.rearranged) bytes += static_cast<int64_t>(t.nbytes());
  for (int j = g.layout.first; j <= g.layout.last; ++j) bytes += static_cast<int64_t>(buckets_[j].extras.nbytes());
  return bytes;
}

std::shared_ptr<Work> ShardedParameters::Gather(int k, const std::string& why, Tensor whole) {
  const Bucket& b = buckets_[k];
  // In place: this rank's piece goes to its block first (rounded to a
  // 16-bit `whole`).
  Tensor mine = whole.View(comm_->rank() * b.shard, {b.shard});
  if (whole.dtype() == DType::kF32) {
    Copy(ctx_, b.piece, mine);
  } else {
    CastScaled(ctx_, b.piece, 1.0f, mine);
  }
  const CollectiveLabel label("all-gather of parameter bucket " + std::to_string(k) + why);
  return comm_->AllGather(mine, whole);
}

void ShardedParameters::WaitFor(int k) {
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

void ShardedParameters::Arrive(int k) {
  WaitFor(k);
  if (low() && groups_[k].gathered.defined() && !groups_[k].placed) Place(k);
}

void ShardedParameters::Evict(int k) {
  Group& g = groups_[k];
  WaitFor(k);  // its gathers still write into the buffers
  gathered_ -= GroupBytes(g);
  for (int j = g.layout.first; j <= g.layout.last; ++j) {
    for (Parameter* p : buckets_[j].plan.params) p->value = p->low = Tensor();
    buckets_[j].extras = Tensor();
  }
  g.gathered = g.f32_values = Tensor();
  g.rearranged.clear();
  g.placed = g.jump = false;
  --resident_;
}

void ShardedParameters::EvictAll() {
  for (int k = 0; k < num_groups(); ++k) {
    if (groups_[k].gathered.defined()) Evict(k);
  }
}

void ShardedParameters::AfterUpdate() {
  if (!sharded_) (void)Shard();  // no broadcast: nothing to fail
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
  for (int k = 0; k < num_groups(); ++k) WaitFor(k);
  Status s = status_;
  status_ = Status::Ok();
  return s;
}

Status ShardedParameters::Materialize() {
  if (!sharded_) (void)Shard();  // no broadcast: nothing to fail
  RETURN_IF_ERROR(Finish());
  if (materialized_) return Status::Ok();
  EvictAll();
  Tensor flat = Tensor::Empty({model_->num_parameters()}, DType::kF32, model_->device());
  RETURN_IF_ERROR(ForEachGatheredBucket([&](const BucketPlan& plan, const Tensor& values) {
    Tensor place = flat.View(plan.offset, {plan.numel});
    Copy(ctx_, values, place);
    return Status::Ok();
  }));
  model_->AdoptFlatParameters(ctx_, std::move(flat));
  materialized_ = true;
  return Status::Ok();
}

Status ShardedParameters::ForEachGatheredBucket(const BucketVisitor& visit) {
  if (!sharded_) (void)Shard();  // no broadcast: nothing to fail
  RETURN_IF_ERROR(Finish());
  Status first;
  for (int k = 0; k < static_cast<int>(buckets_.size()); ++k) {
    const Bucket& b = buckets_[k];
    // Padded to world x shard: gathered apart.
    Tensor whole = Tensor::Empty({b.shard * comm_->world_size()}, DType::kF32, model_->device());
    RETURN_IF_ERROR(Gather(k, " (every parameter)", whole)->Wait());
    const Status s = visit(b.plan, whole.View(0, {b.plan.numel}));
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

void ShardedParameters::Release() {
  if (!materialized_) return;
  model_->ReleaseFlatParameters(ctx_, /*keep_working_copy=*/!working_too_);
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
