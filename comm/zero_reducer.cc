#include "comm/zero_reducer.h"

#include <algorithm>

#include "comm/buckets.h"
#include "comm/watchdog.h"
#include "runtime/crc32c.h"
#include "runtime/ops/elementwise.h"
#include "runtime/clock.h"

namespace ddp {

ZeroReducer::ZeroReducer(Communicator* comm, Model* model, const ZeroOptions& options)
    : comm_(comm), model_(model), options_(options) {
  CHECK(options.stage >= 1 && options.stage <= 3) << "ZeRO stage " << options.stage;
  CHECK(options.stage < 3 || options.gather_dtype == model->compute_dtype())
      << "ZeRO stage 3 gathers the model's compute dtype, not " << DTypeName(options.gather_dtype);
  const Device device = model->device();
  const int world = comm->world_size(), rank = comm->rank();
  // The model's flat gradients go first, before the buffers that replace
  // them: the two never coexist, so building the reducer raises no peak.
  for (Parameter* p : model->parameters()) p->grad = Tensor();
  model->ReleaseFlatGradients();
  flat_offset_ = FlatOffsets(*model);
  int64_t largest = 0;
  // Split slices a multiple of the world size apart: a split parameter's
  // padded buckets laid end to end are that parameter, padded at its end.
  std::vector<BucketPlan> plans =
      PlanBuckets(*model, options.first_bucket_mb, options.bucket_mb, world, /*rearranged_whole=*/true);
  groups_ = GroupBuckets(plans, world);
  schedule_ = std::make_unique<BucketSchedule>(*model, plans);
  if (ShardsMasters(options.stage, options.gather_dtype)) {
    sharded_ = std::make_unique<ShardedParameters>(comm, model, plans, groups_, /*working_too=*/options.stage == 3,
                                                   options.prefetch, options.ctx);
  }
  for (BucketPlan& plan : plans) {
    Bucket b{std::move(plan)};
    b.shard = ShardSize(b.numel, world);
    b.owned = OwnedElements(b.numel, world, rank);
    largest = std::max(largest, b.shard * world);
    buckets_.push_back(std::move(b));
  }
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    for (int k = groups_[g].first; k <= groups_[g].last; ++k) buckets_[k].group = g;
  }
  CHECK(options.wire_dtype == DType::kF32 || options.wire_dtype == DType::kBF16 ||
        options.wire_dtype == DType::kF16)
      << "wire dtype " << DTypeName(options.wire_dtype);
  const bool compress = options.wire_dtype != DType::kF32;
  // Stage 1's f32 bucket buffers persist (the optimizer reads its pieces
  // there); every stage's 16-bit wire buffers come from a pool.
  for (int k = 0; k < kBuffersInFlight; ++k) {
    if (options.stage >= 2) pool_.push_back(Tensor::Zeros({largest}, DType::kF32, device));
    if (compress) wire_pool_.push_back(Tensor::Zeros({largest}, options.wire_dtype, device));
  }
  if (options.gather_dtype != DType::kF32) {
    CHECK(options.gather_dtype == model->compute_dtype())
        << "ZeRO gathers " << DTypeName(options.gather_dtype) << " but the model computes in "
        << DTypeName(model->compute_dtype());
    // Stage 3's gathers are ShardedParameters', which plans its own.
    if (!stage3()) {
      for (Bucket& b : buckets_) b.f32_reads = F32Reads::Plan(b, b.shard, world, flat_offset_);
    }
  }
  for (Bucket& b : buckets_) {
    if (options.stage >= 2) b.piece = Tensor::Zeros({b.shard}, DType::kF32, device);
  }
  for (const BucketGroup& g : groups_) {
    // Stage 1: each group's buffer persists. Stages 2 and 3: a split
    // parameter's buckets get one buffer while backward writes it
    // (PrepareSplitGradient); the rest take pool buffers.
    if (options.stage == 1) ViewGroupGradients(g, Tensor::Zeros({g.size}, DType::kF32, device));
    if (options.stage >= 2 && !buckets_[g.first].split) ViewGroupGradients(g, pool_[g.first % kBuffersInFlight]);
  }
  model->SetGradientReadyHook(this);
}

ZeroReducer::~ZeroReducer() { model_->SetGradientReadyHook(nullptr); }

std::vector<OptimizerSlot> ZeroReducer::OptimizerSlots(
    const std::function<float(const Parameter&)>& weight_decay) const {
  std::vector<OptimizerSlot> slots;
  const int64_t rank = comm_->rank();
  std::unordered_map<const Parameter*, int> index;
  for (Parameter* p : model_->parameters()) index.emplace(p, static_cast<int>(index.size()));
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    // This rank's piece, in bucket coordinates: [lo, hi).
    const int64_t lo = rank * b.shard, hi = lo + b.owned;
    const Tensor owned = OwnedGradients(b);
    for (Parameter* p : b.params) {
      const int64_t start = flat_offset_.at(p) - b.offset, end = start + NumElements(p->shape);
      const int64_t a = std::max(lo, start), z = std::min(hi, end);
      if (a >= z) continue;
      // The master values: this rank's piece, or the model's flat parameters.
      const Tensor value = sharded_ ? sharded_->piece(static_cast<int>(k)).View(a - lo, {z - a})
                                    : model_->flat_parameters().View(b.offset + a, {z - a});
      slots.push_back({p->name, value, owned.View(a - lo, {z - a}), weight_decay(*p), index.at(p), a - start});
    }
  }
  return slots;
}

void ZeroReducer::PrepareForBackward(bool sync, bool first_micro_batch) {
  CHECK(sync || options_.stage == 1) << "ZeRO stages 2 and 3 reduce every micro-batch";
  // The shards exist before any update, also where no start-up broadcast
  // made them (tests that drive the reducer alone).
  if (sharded_) (void)sharded_->Shard();  // no broadcast: nothing to fail
  if (stage3()) {
    sharded_->SetPass(ShardedParameters::Pass::kBackward);
  } else {
    // Gathers land in the buffers backward writes: any the forward did not
    // wait for (a parameter it never read) finish now; a failure is
    // reported by Wait.
    const Status gathered = FinishParameterGather();
    if (!gathered.ok()) gather_status_ = gathered;
  }
  sync_ = sync;
  first_micro_batch_ = first_micro_batch;
  if (!sync) return;
  for (Bucket& b : buckets_) {
    b.work.reset();
    b.prepared = false;
  }
  schedule_->Reset();
  next_to_finish_ = 0;
  timings_.assign(buckets_.size(), BucketTiming());
  deferred_ = Status::Ok();
  backward_start_ = SteadySeconds();
}

void ZeroReducer::ViewGroupGradients(const BucketGroup& g, const Tensor& buffer) {
  for (int k = g.first; k <= g.last; ++k) {
    Bucket& b = buckets_[k];
    b.grads = buffer.View(b.offset - g.base, {b.shard * comm_->world_size()});
  }
  for (int k = g.first; k <= g.last; ++k) {
    for (Parameter* p : buckets_[k].params) p->grad = buffer.View(flat_offset_[p] - g.base, p->shape);
  }
}

void ZeroReducer::PrepareGradient(Parameter& param) {
  if (options_.stage == 1 || !sync_) return;
  const int k = schedule_->buckets_of(param).first;
  Bucket& bucket = buckets_[k];
  if (bucket.split) {
    // Also when its buckets were reduced already and released (a gradient
    // out of order, which FinishBackward reports on every rank): the layer
    // still writes somewhere.
    if (!bucket.prepared || !bucket.grads.defined()) PrepareSplitGradient(groups_[bucket.group]);
    return;
  }
  if (bucket.prepared) return;
  FreePoolBuffer(k);
  ViewGroupGradients(groups_[bucket.group], pool_[k % kBuffersInFlight]);
  bucket.prepared = true;
}

void ZeroReducer::PrepareSplitGradient(const BucketGroup& g) {
  // The parameter's gradient is one tensor: one buffer for its buckets
  // (padding zeroed), freed once the last of them is reduced (Finish).
  // Earlier buckets whose reduce-scatters have arrived finish first, so an
  // earlier split parameter's buffer goes before this one comes.
  FinishArrived();
  if (buckets_[g.first].grads.defined()) split_gradient_live_ -= g.size * 4;  // replaced
  Tensor buffer = Tensor::Empty({g.size}, DType::kF32, model_->device());
  const Bucket& top = buckets_[g.first];
  const int64_t end = top.offset - g.base + top.numel;
  if (end < g.size) buffer.View(end, {g.size - end}).Fill(0.0);
  ViewGroupGradients(g, buffer);
  for (int k = g.first; k <= g.last; ++k) buckets_[k].prepared = true;
  split_gradient_live_ += g.size * 4;
  split_gradient_peak_ = std::max(split_gradient_peak_, split_gradient_live_);
}

void ZeroReducer::FinishArrived() {
  while (next_to_finish_ < schedule_->next_to_launch() && buckets_[next_to_finish_].work != nullptr &&
         buckets_[next_to_finish_].work->IsCompleted()) {
    FinishNextInBackward();
  }
}

void ZeroReducer::FinishNextInBackward() {
  const int finishing = next_to_finish_++;
  const Status s = Finish(finishing, &timings_[finishing]);
  if (!s.ok() && deferred_.ok()) deferred_ = s;
}

void ZeroReducer::FreePoolBuffer(int k) {
  while (next_to_finish_ <= k - kBuffersInFlight) FinishNextInBackward();
}

void ZeroReducer::MarkGradientReady(Parameter& param) {
  if (sync_) schedule_->MarkGradientReady(param, options_.overlap, [this](int k) { Launch(buckets_[k]); });
}

void ZeroReducer::Launch(Bucket& bucket) {
  bucket.launched = SteadySeconds() - backward_start_;
  const int k = static_cast<int>(&bucket - buckets_.data());
  const CollectiveLabel label("reduce-scatter of gradient bucket " + std::to_string(k));
  // A split parameter whose gradient never came (a failing backward) still
  // sends, as every rank must.
  if (bucket.split && !bucket.grads.defined()) PrepareSplitGradient(groups_[bucket.group]);
  if (options_.wire_dtype != DType::kF32) {
    FreePoolBuffer(k);  // stages 2 and 3 did as they took the f32 buffer
    bucket.wire = wire_pool_[k % kBuffersInFlight].View(0, {bucket.shard * comm_->world_size()});
  }
  // In place: this rank's summed block lands in its own block of the bucket
  // buffer (or of its 16-bit wire copy, widened back by Finish), which for
  // stage 1 is where the optimizer slots view it.
  Tensor& on_wire = options_.wire_dtype == DType::kF32 ? bucket.grads : bucket.wire;
  if (options_.wire_dtype != DType::kF32) CastScaled(options_.ctx, bucket.grads, 1.0f, bucket.wire);
  bucket.work = comm_->ReduceScatter(on_wire, on_wire.View(comm_->rank() * bucket.shard, {bucket.shard}),
                                     ReduceOp::kSum);
}

Status ZeroReducer::Finish(int k, BucketTiming* timing) {
  // Buckets launch in order: any not launched yet (no overlap) go now.
  while (schedule_->next_to_launch() <= k) Launch(buckets_[schedule_->TakeNext()]);
  Bucket& b = buckets_[k];
  const double start = SteadySeconds();
  RETURN_IF_ERROR(b.work->Wait());
  timing->waited = SteadySeconds() - start;
  timing->launched = b.launched;
  timing->finished = FinishedAfter(*b.work, backward_start_);
  if (options_.wire_dtype != DType::kF32 && b.owned > 0) {
    // This rank's summed block, widened into its f32 block of the bucket.
    Tensor wide = b.grads.View(comm_->rank() * b.shard, {b.owned});
    CastScaled(options_.ctx, b.wire.View(comm_->rank() * b.shard, {b.owned}), 1.0f, wide);
  }
  if (options_.stage == 1) return Status::Ok();  // already where the optimizer slots view it
  // Stage 2: from the transient pool buffer into the persistent piece.
  const Tensor summed = b.grads.View(comm_->rank() * b.shard, {b.owned});
  Tensor owned = OwnedGradients(b);
  if (first_micro_batch_) {
    Copy(options_.ctx, summed, owned);
  } else {
    Axpy(options_.ctx, 1.0f, summed, owned);  // accumulate this micro-batch into the piece
  }
  if (b.split && k == groups_[b.group].last) ReleaseSplitGradient(groups_[b.group]);
  return Status::Ok();
}

void ZeroReducer::ReleaseSplitGradient(const BucketGroup& g) {
  if (buckets_[g.first].grads.defined()) split_gradient_live_ -= g.size * 4;
  for (int k = g.first; k <= g.last; ++k) {
    buckets_[k].grads = Tensor();
    for (Parameter* p : buckets_[k].params) p->grad = Tensor();
  }
}

StatusOr<ReduceStats> ZeroReducer::Wait() {
  CHECK(sync_) << "ZeroReducer::Wait after a backward without sync";
  Status local = FinishParameterGather();  // a parameter the forward never read
  if (local.ok()) local = deferred_;
  if (local.ok()) local = schedule_->CheckComplete();
  for (; next_to_finish_ < static_cast<int>(buckets_.size()); ++next_to_finish_) {
    // A later bucket's failure follows from an earlier one's: the first is
    // reported.
    const Status s = Finish(next_to_finish_, &timings_[next_to_finish_]);
    if (!s.ok()) return local.ok() ? s : local;
  }
  ReduceStats stats;
  stats.buckets = timings_;
  stats.backward_start = backward_start_;
  // Includes waits inside backward for a free pool buffer (stage 2).
  for (const BucketTiming& t : timings_) stats.exposed_seconds += t.waited;
  // And the waits of this step's forward for the previous update's gather.
  stats.exposed_seconds += gather_waited_;
  gather_waited_ = 0.0;
  if (stage3()) {
    stats.exposed_seconds += sharded_->TakeWaited();
    sharded_->SetPass(ShardedParameters::Pass::kForward);  // the next micro-batch's
  }
  sync_ = false;
  // The first synchronized backward: the observed order must be the static
  // one on every rank, decided together.
  RETURN_IF_ERROR(schedule_->FinishBackward(comm_, local));
  return stats;
}

std::vector<Tensor> ZeroReducer::GradientPieces() const {
  std::vector<Tensor> pieces;
  for (const Bucket& b : buckets_) pieces.push_back(OwnedGradients(b));
  return pieces;
}

StatusOr<double> ZeroReducer::GlobalGradientSquaredNorm(ExecutionContext& ctx) {
  // A host value: every backend reduces host tensors and returns them ready.
  Tensor sum = Tensor::FromVector<double>({GradientSquaredNorm(ctx, GradientPieces())}, {1});
  RETURN_IF_ERROR(comm_->AllReduce(sum, ReduceOp::kSum)->Wait());
  return sum.data<double>()[0];
}

Tensor ZeroReducer::GatherTarget(int k) const {
  // Free at this point of the step: stage 1's own bucket buffer (its
  // gradients were consumed by the optimizer, and the next backward
  // overwrites them), or stage 2's pool buffer of the bucket.
  const Bucket& b = buckets_[k];
  const int64_t size = b.shard * comm_->world_size();
  return options_.stage == 1 ? b.grads : pool_[k % kBuffersInFlight].View(0, {size});
}

void ZeroReducer::LaunchGather(int k, bool low) {
  const Bucket& b = buckets_[k];
  const CollectiveLabel label("all-gather of parameter bucket " + std::to_string(k));
  const int rank = comm_->rank();
  // In place: this rank's piece goes to its block of the target first. The
  // 16-bit target is the f32 one's memory read as 16-bit.
  Tensor target = GatherTarget(k);
  if (low) target = target.ReinterpretAs(options_.gather_dtype, {target.numel()});
  Tensor mine = target.View(rank * b.shard, {b.shard});
  if (b.owned > 0) {
    const Tensor master = MasterPiece(k);
    Tensor owned = mine.View(0, {b.owned});
    if (low) {
      CastScaled(options_.ctx, master, 1.0f, owned);
    } else {
      Copy(options_.ctx, master, owned);
    }
  }
  gather_work_[k] = comm_->AllGather(mine, target);
  if (low && b.f32_reads.shard > 0) {
    // In flight only: the values land in the parameters (PlaceGather).
    extras_work_[k] = b.f32_reads.Gather(options_.ctx, comm_, b.shard, MasterPiece(k), &extras_[k]);
  }
  ++gathers_in_flight_;
}

void ZeroReducer::PlaceGather(int k, bool low) {
  const Bucket& b = buckets_[k];
  const Tensor target = GatherTarget(k);
  if (!low) {
    Tensor params = model_->flat_parameters().View(b.offset, {b.numel});
    Copy(options_.ctx, target.View(0, {b.numel}), params);
    // Mixed precision: the forward reads the bucket's low-precision copy.
    model_->RefreshLowPrecision(options_.ctx, b.offset, b.numel);
    return;
  }
  model_->RefreshLowPrecisionFrom(options_.ctx, b.offset, b.numel,
                                  target.ReinterpretAs(options_.gather_dtype, {b.numel}));
  // The f32-read parameters, unpacked into their values (the working
  // copy's f32 part; this rank's own too, as its masters are a shard).
  if (!extras_[k].defined()) return;
  b.f32_reads.Unpack(options_.ctx, extras_[k]);
  extras_[k] = Tensor();
}

Tensor ZeroReducer::MasterPiece(int k) const {
  const Bucket& b = buckets_[k];
  if (sharded_) return sharded_->piece(k).View(0, {b.owned});
  // A rank that owns nothing of the last bucket would start past its end.
  const int64_t start = std::min(b.offset + comm_->rank() * b.shard, b.offset + b.numel);
  return model_->flat_parameters().View(start, {b.owned});
}

void ZeroReducer::TopUpGathers() {
  // Stage 2 shares kBuffersInFlight pool buffers (bucket k uses k % 3, and
  // gathers go from the last bucket down), so at most that many travel.
  const int limit = options_.stage == 1 ? static_cast<int>(buckets_.size()) : kBuffersInFlight;
  while (next_gather_launch_ >= 0 && gathers_in_flight_ < limit) LaunchGather(next_gather_launch_--, low_gather());
}

Status ZeroReducer::LaunchParameterGather() {
  if (stage3()) {
    RETURN_IF_ERROR(sharded_->Finish());
    sharded_->AfterUpdate();
    return Status::Ok();
  }
  RETURN_IF_ERROR(FinishParameterGather());  // a gather never overtakes the previous one
  // Master weights gathered whole and not given back are stale from here.
  if (sharded_) sharded_->Release();
  gather_work_.assign(buckets_.size(), nullptr);
  extras_work_.assign(buckets_.size(), nullptr);
  extras_.assign(buckets_.size(), Tensor());
  // The forward reads the flat space upwards: the last bucket first.
  next_gather_launch_ = next_gather_finish_ = static_cast<int>(buckets_.size()) - 1;
  TopUpGathers();
  if (!options_.overlap) return FinishParameterGather();
  return Status::Ok();
}

void ZeroReducer::FinishNextGather() {
  const int k = next_gather_finish_--;
  while (gather_work_[k] == nullptr) LaunchGather(next_gather_launch_--, low_gather());  // launch up to it
  const double start = SteadySeconds();
  Status s = gather_work_[k]->Wait();
  if (s.ok() && extras_work_[k] != nullptr) s = extras_work_[k]->Wait();
  gather_waited_ += SteadySeconds() - start;
  gather_work_[k].reset();
  extras_work_[k].reset();
  --gathers_in_flight_;
  if (s.ok()) {
    PlaceGather(k, low_gather());
  } else if (gather_status_.ok()) {
    gather_status_ = s;
  }
  TopUpGathers();
}

Status ZeroReducer::GatherMasterWeights() {
  RETURN_IF_ERROR(FinishParameterGather());
  return sharded_ ? sharded_->Materialize() : Status::Ok();
}

void ZeroReducer::PrepareParameter(const Parameter& param) {
  const int k = schedule_->buckets_of(param).first;
  if (stage3()) {
    sharded_->Demand(buckets_[k].group);
    return;
  }
  // Buckets arrive in launch order (from the last down): copy every earlier
  // one on the way, and each of a split parameter's.
  while (next_gather_finish_ >= k) FinishNextGather();
}

Status ZeroReducer::FinishParameterGather() {
  if (stage3()) return sharded_->Finish();
  while (next_gather_finish_ >= 0) FinishNextGather();
  Status s = gather_status_;
  gather_status_ = Status::Ok();
  return s;
}

Status ZeroReducer::ForEachMasterBucket(const ShardedParameters::BucketVisitor& visit) {
  CHECK(sharded_ != nullptr) << "ForEachMasterBucket where the master weights are whole";
  RETURN_IF_ERROR(FinishParameterGather());
  return sharded_->ForEachGatheredBucket(visit);
}

void ZeroReducer::ReleaseMasterWeights() {
  if (sharded_) sharded_->Release();
}

Status ZeroReducer::ShardParameters(bool from_root) {
  if (!sharded_) return Status::Ok();
  RETURN_IF_ERROR(sharded_->Shard(from_root));
  if (stage3()) return Status::Ok();
  // The working copy from the pieces, as after an update: alike on every
  // rank, and made here where the model left its 16-bit copy to the shards'
  // owner (Model::MoveParts).
  model_->EnsureLowPrecisionCopy(options_.ctx);
  RETURN_IF_ERROR(LaunchParameterGather());
  return FinishParameterGather();
}

int64_t ZeroReducer::master_bytes() const {
  return sharded_ ? sharded_->piece_bytes() : static_cast<int64_t>(model_->num_parameters()) * 4;
}

Traffic ZeroReducer::UnsentGather() const {
  Traffic t;
  if (stage3()) return t;  // gathered as the step reads them, each counted as it goes
  const int world = comm_->world_size();
  const int64_t element = low_gather() ? DTypeSize(options_.gather_dtype) : DTypeSize(DType::kF32);
  for (int k = next_gather_launch_; k >= 0; --k) {  // launches go from the last bucket down
    const Bucket& b = buckets_[k];
    t.all_gather += RingBytes(b.shard * world * element, world, /*all_reduce=*/false);
    if (low_gather()) t.all_gather += RingBytes(b.f32_reads.shard * world * DTypeSize(DType::kF32), world, false);
  }
  return t;
}

uint32_t ZeroReducer::layout_fingerprint() const {
  std::vector<int64_t> ranges;
  for (const Bucket& b : buckets_) {
    ranges.push_back(b.offset);
    ranges.push_back(b.numel);
  }
  const uint32_t crc = Crc32c(ranges.data(), ranges.size() * sizeof(int64_t));
  return crc == 0 ? 1 : crc;
}

int64_t ZeroReducer::gradient_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += static_cast<int64_t>(options_.stage >= 2 ? b.piece.nbytes() : b.grads.nbytes());
  return bytes;
}

int64_t ZeroReducer::transient_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& t : pool_) bytes += static_cast<int64_t>(t.nbytes());
  for (const Tensor& t : wire_pool_) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace ddp
