// Gradient synchronization, whichever way it runs, so the step never asks:
// local (one rank, no communicator), plain DDP (comm/reducer.h: buckets
// all-reduced while backward runs) or ZeRO 1/2/3 (comm/zero_reducer.h:
// reduce-scattered into this rank's pieces, the updated pieces all-gathered
// back; at stage 3 only while a layer reads them). Exactly one of the
// three, fixed at construction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/buckets.h"
#include "comm/communicator.h"
#include "comm/reducer.h"
#include "comm/zero_reducer.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/status.h"

namespace ddp {

struct GradientSyncOptions : BucketOptions {
  int zero_stage = 0;  // 0: plain DDP; 1, 2 or 3: ZeRO (with a communicator)
  int zero_prefetch = 1;  // stage 3: buckets gathered ahead (--zero-prefetch)
  DType gather_dtype = DType::kF32;  // ZeRO's parameter all-gather: f32, or the model's 16-bit copy
};

class GradientSync {
 public:
  // `comm` null: one rank, gradients stay where backward left them. The
  // loss gradient must come divided by the world size (the step does it),
  // so buckets are summed. Hooks into `model`, which outlives this.
  GradientSync(Communicator* comm, Model* model, const GradientSyncOptions& options, const ExecutionContext& ctx);

  // What the optimizer updates: every parameter, or under ZeRO this rank's
  // pieces; `weight_decay(p)` gives each parameter's rate.
  std::vector<OptimizerSlot> OptimizerSlots(const std::function<float(const Parameter&)>& weight_decay) const;
  // LAMB's per-parameter norms: summed across ranks where a parameter's
  // pieces are spread over them (ZeRO); else none.
  AllReduceSum NormAllReduce() const;
  bool sharded() const { return zero_ != nullptr; }
  int zero_stage() const { return zero_ ? options_.zero_stage : 0; }
  // The bucket collective, for the timeline: "all-reduce" or "reduce-scatter".
  const char* collective() const { return zero_ ? "reduce-scatter" : "all-reduce"; }

  // ZeRO-2 reduce-scatters every micro-batch into the gradient pieces;
  // otherwise gradients accumulate locally and are reduced once a step.
  bool reduces_each_micro_batch() const { return zero_ && options_.zero_stage >= 2; }
  // Before micro-batch `micro` of `micro_batches`' backward: whether its
  // gradients are reduced (the last; every one under ZeRO-2) or accumulate.
  void PrepareForBackward(int64_t micro, int64_t micro_batches);
  // After micro-batch `micro`'s backward: ZeRO-2 waits for each but the
  // last one's reduce-scatter here. Seconds the wait was exposed (0 when
  // nothing was waited for).
  StatusOr<double> WaitMicroBatch(int64_t micro, int64_t micro_batches);
  // After the step's last backward: every bucket reduced (`graphed`: a
  // replayed CUDA graph has waited for its all-reduces itself).
  StatusOr<ReduceStats> Wait(bool graphed);

  // The gradients this rank holds after the reduction: the flat buffer, or
  // its ZeRO pieces.
  std::vector<Tensor> Held() const;
  // Whether every gradient this rank holds is finite.
  bool HeldFinite(ExecutionContext& ctx) const;
  // The first parameter (piece, under ZeRO) of this rank whose gradient
  // holds a NaN or Inf, or "?".
  std::string FirstNonFinite(ExecutionContext& ctx) const;
  // Clips the global gradient norm to `max_norm` (under ZeRO from the sum of
  // every rank's pieces' squared norms; each rank scales its own).
  Status ClipToNorm(ExecutionContext& ctx, double max_norm);
  // After the optimizer's update: ZeRO starts all-gathering the updated
  // pieces (overlapped with the next forward); otherwise the model's 16-bit
  // copy is refreshed.
  Status AfterUpdate(ExecutionContext& ctx);
  // ZeRO: every parameter in place before anything reads them all
  // (evaluation); then, where ZeRO holds the f32 master weights in shards
  // (stage 3, or 16-bit gathers), every one of them whole for the moment
  // (ZeRO-3's evaluation). No-ops otherwise.
  Status FinishGather();
  Status GatherMasterWeights();
  // Gives back what GatherMasterWeights gathered; a no-op otherwise.
  void ReleaseMasterWeights();
  // Where ZeRO shards the master weights: each rank keeps only its pieces,
  // rank 0's with `from_root` (the start-up broadcast, a bucket at a time);
  // a no-op otherwise.
  Status ShardParameters(bool from_root);
  // Whether ZeRO holds the f32 master weights in shards (stage 3, or 16-bit
  // gathers), and then their values a bucket at a time
  // (ZeroReducer::ForEachMasterBucket: a collective).
  bool shards_masters() const { return zero_ && zero_->shards_masters(); }
  Status ForEachMasterBucket(const ShardedParameters::BucketVisitor& visit) {
    return zero_->ForEachMasterBucket(visit);
  }
  // The f32 master weights this rank keeps, in bytes.
  int64_t master_bytes() const;
  // ZeRO: what its parameter gather has yet to send (its buckets not yet
  // launched); nothing otherwise.
  Traffic UnsentGather() const { return zero_ ? zero_->UnsentGather() : Traffic(); }
  // The master weights this rank keeps current: the flat parameters, or
  // its ZeRO pieces.
  std::vector<Tensor> MasterWeights() const;

  // For the summary: persistent gradient bytes, ZeRO-2's transient bucket
  // bytes, and ZeRO's gather dtype.
  int64_t gradient_bytes() const;
  int64_t transient_bytes() const { return zero_ ? zero_->transient_bytes() : 0; }
  int64_t gathered_peak_bytes() const { return zero_ ? zero_->gathered_peak_bytes() : 0; }
  int64_t split_gradient_peak_bytes() const { return zero_ ? zero_->split_gradient_peak_bytes() : 0; }
  // The reducers themselves, for the parts that hold state across them
  // (checkpoint shards, the CUDA graph's captured all-reduces): one is
  // non-null at most.
  Reducer* reducer() const { return reducer_.get(); }
  ZeroReducer* zero() const { return zero_.get(); }

 private:
  Communicator* comm_;
  Model* model_;
  GradientSyncOptions options_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<ZeroReducer> zero_;
  std::vector<Tensor> grads_;  // each parameter's gradient (not ZeRO)
};

}  // namespace ddp
