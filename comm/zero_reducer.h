// ZeRO stages 1 and 2 (Megatron's distributed-optimizer layout): the flat parameter
// space is split per bucket, each bucket padded to a multiple of the world
// size, and rank r owns piece r of every bucket. Gradients live in padded
// bucket buffers (each parameter's grad is a view into one); as a bucket
// completes during backward it is reduce-scattered in place, so each rank
// ends up with the summed gradient of its pieces in its own block of the
// bucket buffer. The optimizer sees only this rank's pieces
// (OptimizerSlots), so its state is 1/N; after the update the pieces are
// all-gathered back into the full parameters, bucket by bucket, in place in
// buffers that are free until the next backward, while the next forward
// runs (each layer waits only for its bucket). Never falls back to
// unsharded.
//
// Mixed precision (the model keeps a low-precision copy of its weights):
// with gather_dtype 16-bit (the default there), each rank keeps the f32
// master weights of its pieces only (ShardedParameters, as stage 3 does),
// and the 16-bit copy is the working copy. Each owner rounds its updated
// piece and the 16-bit bucket is gathered, half the bytes, then put into
// that copy (rearranged where it is channels-last) as the forward reaches
// it. The parameters the forward reads in f32 (norms, embedding tables,
// f32 outputs' biases: Parameter::forward_reads_f32) travel in f32 beside
// it, packed per rank, into their values: the working copy's f32 part
// (Model::ReleaseFlatParameters). (BERT's word embeddings so travel twice,
// in the 16-bit bucket for the tied decoder and in f32 for the lookup.)
// Checkpoints keep each rank's pieces, --save-weights gathers them a bucket
// at a time (ForEachMasterBucket), and GatherMasterWeights gathers them
// whole for the moment (ZeRO-3's evaluation), given back by
// ReleaseMasterWeights. With gather_dtype f32 the masters stay whole on
// every rank: the f32 pieces are gathered and rounded into the copy on
// arrival; both give the same bits.
//
// Stage 2 keeps only the pieces of the gradients: full-size bucket buffers
// are transient, a few (kBuffersInFlight) in a pool that buckets take in
// turn as backward reaches them, each reused once its reduce-scatter has
// finished. Every micro-batch is reduce-scattered and added into the pieces
// (DeepSpeed's accumulation), so backward always overwrites the buffers.
//
// A parameter larger than --bucket-mb is split into buckets of its own
// (comm/buckets.h), its slices a multiple of the world size apart, so its
// padded buckets laid end to end are the parameter padded at its end: one
// buffer holds its gradient (stage 1: for good; stages 2 and 3: from when
// backward writes it until the last of its buckets is reduced).
//
// Stage 3 reduces gradients as stage 2 does and shards the parameters too
// (comm/zero_parameters.h): each rank keeps its pieces' f32 values, the
// optimizer updates them there, and a bucket is all-gathered only while a
// layer's forward or backward reads it; under mixed precision the gather
// carries the 16-bit weights and the f32 reads beside them, and no whole
// working copy is kept.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/bucket_schedule.h"
#include "comm/buckets.h"
#include "comm/communicator.h"
#include "comm/reducer.h"
#include "comm/traffic.h"
#include "comm/zero_parameters.h"
#include "runtime/layers/model.h"
#include "runtime/optim/optimizer.h"

namespace ddp {

// Gradients on the wire (wire_dtype): f32, or bf16/f16: each bucket is
// rounded into a 16-bit buffer (one of kBuffersInFlight, taken in turn once
// the bucket that used it before arrived), reduce-scattered there, and this
// rank's block widened back into f32.
struct ZeroOptions : BucketOptions {
  int stage = 1;  // 1, 2 or 3
  // Stage 3: buckets gathered ahead of the one a pass reads (--zero-prefetch).
  int prefetch = 1;
  // Parameters on the gather: f32, or the model's low-precision dtype (see
  // above; the model must keep that copy).
  DType gather_dtype = DType::kF32;
  // Where copies and accumulation run: the model's device and stream (a
  // copy of the trainer's context shares its stream and scratch memory).
  ExecutionContext ctx = ExecutionContext::Cpu();
};

class ZeroReducer : public GradientReadyHook {
 public:
  // Its plan (parameters in backward order; offset and numel: its range in
  // the flat parameter space) and what reducing it takes.
  struct Bucket : BucketPlan {
    int64_t shard = 0;               // padded numel / world
    int64_t owned = 0;               // this rank's elements inside numel (0 <= owned <= shard)
    Tensor grads;                    // padded bucket buffer, world * shard (stage 2: a pool buffer while in use)
    Tensor piece;                    // stage 2: this rank's summed gradient piece, shard elements
    Tensor wire;                     // compression: the 16-bit bucket on the wire, a pool buffer while in flight
    bool prepared = false;           // stage 2: holds a gradient buffer in this backward
    int group = 0;                   // its group (comm/buckets.h): a split parameter's buckets share one
    F32Reads f32_reads;  // 16-bit gathers: the f32-read parameters' elements, gathered beside
    std::shared_ptr<Work> work;
    double launched = 0.0;
  };

  // Re-points every parameter's gradient into the padded bucket buffers and
  // releases the model's flat gradient buffer. Gradients must reach it
  // already divided by the world size (the trainer scales the loss
  // gradient); buckets are summed.
  ZeroReducer(Communicator* comm, Model* model, const ZeroOptions& options);
  ~ZeroReducer() override;

  // This rank's pieces, one slot per parameter piece, so per-parameter
  // weight decay is exact. `weight_decay(p)` gives each parameter's rate.
  std::vector<OptimizerSlot> OptimizerSlots(const std::function<float(const Parameter&)>& weight_decay) const;

  // Stage 1: `sync` false keeps gradients in the buffers to accumulate
  // (no_sync). Stage 2 reduces every micro-batch: `first_micro_batch` says
  // whether the pieces start over or add up.
  void PrepareForBackward(bool sync, bool first_micro_batch = true);
  void PrepareGradient(Parameter& param) override;
  void MarkGradientReady(Parameter& param) override;
  // After a synchronized backward: this rank's pieces hold the summed
  // gradients (the rest of the bucket buffers is stale).
  StatusOr<ReduceStats> Wait();
  // The squared global gradient norm: the sum of every rank's pieces'.
  StatusOr<double> GlobalGradientSquaredNorm(ExecutionContext& ctx);
  // This rank's summed gradient pieces, one per bucket (for clipping).
  std::vector<Tensor> GradientPieces() const;
  // After the optimizer updated this rank's pieces: starts all-gathering
  // them into the full parameters, bucket by bucket, in the order the next
  // forward reads them (the flat space upwards, so the last bucket first).
  // Each bucket is copied into place when the forward first reads one of
  // its parameters (PrepareParameter), so the gather overlaps the next
  // forward; without overlap (--nooverlap) it finishes here.
  Status LaunchParameterGather();
  void PrepareParameter(const Parameter& param) override;
  // Every bucket still in flight arrives and is copied into place; the first
  // failure of any bucket's gather, also one met inside forward. Call before
  // anything reads all parameters (evaluation); Wait() calls it too.
  Status FinishParameterGather();
  // After FinishParameterGather, where the masters are sharded (stage 3,
  // 16-bit gathers): gathers every f32 master weight (synchronously) into
  // a flat buffer the model adopts, so every parameter's f32 value is
  // current on every rank (before saving). A no-op otherwise.
  Status GatherMasterWeights();
  // Gives back what GatherMasterWeights gathered (stage 3's next update
  // does too); a no-op where the masters are whole.
  void ReleaseMasterWeights();
  // Where the masters are sharded: makes the shards (this rank's pieces of
  // the model's flat parameters, rank 0's with `from_root`: see
  // ShardedParameters::Shard) and frees those; stages 1 and 2 then gather
  // the working copy from the pieces. A no-op otherwise.
  Status ShardParameters(bool from_root);
  // Whether this rank keeps only its pieces of the f32 master weights.
  bool shards_masters() const { return sharded_ != nullptr; }
  // Whether a reducer of `stage` gathering `gather_dtype` will: stage 3's
  // masters, and under mixed precision with 16-bit gathers every stage's
  // (the 16-bit copy is then the working copy; f32 gathers deliver the
  // masters whole).
  static bool ShardsMasters(int stage, DType gather_dtype) { return stage == 3 || gather_dtype != DType::kF32; }
  // Where it does: ShardedParameters::ForEachGatheredBucket, after any
  // gather in flight arrived.
  Status ForEachMasterBucket(const ShardedParameters::BucketVisitor& visit);
  // The f32 master weights this rank keeps: its pieces (sharded), or the
  // model's flat parameters.
  int64_t master_bytes() const;
  // Stage 3: the most bytes of gathered parameter buckets held at once; 0
  // otherwise.
  int64_t gathered_peak_bytes() const { return stage3() ? sharded_->gathered_peak_bytes() : 0; }
  // What the parameter gather still has to send (comm/traffic.h): its
  // buckets not yet launched, which the next forward or
  // FinishParameterGather will launch.
  Traffic UnsentGather() const;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The bucket layout (each bucket's range in the flat space), as a CRC-32C
  // that is never 0: ranks with equal fingerprints hold the same pieces.
  uint32_t layout_fingerprint() const;
  DType gather_dtype() const { return options_.gather_dtype; }
  // Persistent gradient bytes: the padded bucket buffers (stage 1), or only
  // this rank's pieces (stage 2).
  int64_t gradient_bytes() const;
  // The pools reused while training: stage 2 and 3's full-size f32 bucket
  // buffers, and every stage's 16-bit wire buffers (compression).
  int64_t transient_bytes() const;
  static constexpr int kBuffersInFlight = 3;
  // Stages 2 and 3: the most bytes of split parameters' gradient buffers
  // held at once (each from when backward writes it until the last of its
  // buckets is reduced); 0 when none was.
  int64_t split_gradient_peak_bytes() const { return split_gradient_peak_; }

 private:
  // Points the group's buckets and parameters' gradients into `buffer`.
  void ViewGroupGradients(const BucketGroup& g, const Tensor& buffer);
  // Stages 2 and 3: a split parameter's gradient buffer, for backward to
  // write.
  void PrepareSplitGradient(const BucketGroup& g);
  // Stages 2 and 3: a split parameter's gradient buffer, once the last of
  // its buckets is reduced.
  void ReleaseSplitGradient(const BucketGroup& g);
  void Launch(Bucket& bucket);
  // Bucket k's pool buffers (k % kBuffersInFlight, f32 and wire) are free
  // once the bucket that used them before has finished its reduce-scatter:
  // finishes it and any earlier one (a failure is reported by Wait).
  void FreePoolBuffer(int k);
  // Finishes, in order, the launched buckets whose collectives have
  // arrived, without waiting for any.
  void FinishArrived();
  // Finishes the next bucket inside backward; a failure is kept for Wait.
  void FinishNextInBackward();
  // Waits for bucket `k`'s reduce-scatter and moves its result into place.
  Status Finish(int k, BucketTiming* timing);
  // The parameter gather of bucket k lands in a buffer that is free between
  // the optimizer step and the next backward: stage 1's bucket buffer,
  // stage 2's pool buffer k % kBuffersInFlight. No staging memory.
  Tensor GatherTarget(int k) const;
  // Starts bucket k's gather: of the f32 pieces (`low` false), or of the
  // rounded pieces and the f32-read extras.
  void LaunchGather(int k, bool low);
  // This rank's f32 master values of bucket k (`owned` elements): its
  // piece, or its part of the model's flat parameters.
  Tensor MasterPiece(int k) const;
  // Bucket k's gather has arrived: into the model.
  void PlaceGather(int k, bool low);
  bool low_gather() const { return options_.gather_dtype != DType::kF32; }
  // Launches further gathers, as far as free buffers allow.
  void TopUpGathers();
  // Waits for the oldest gather in flight, copies it into place, tops up.
  void FinishNextGather();
  bool stage3() const { return options_.stage == 3; }
  Tensor OwnedGradients(const Bucket& b) const {
    return options_.stage >= 2 ? b.piece.View(0, {b.owned}) : b.grads.View(comm_->rank() * b.shard, {b.owned});
  }

  Communicator* comm_;
  Model* model_;
  ZeroOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<BucketGroup> groups_;
  int64_t split_gradient_live_ = 0, split_gradient_peak_ = 0;
  std::unordered_map<const Parameter*, int64_t> flat_offset_;
  bool sync_ = false;
  bool first_micro_batch_ = true;
  std::unique_ptr<BucketSchedule> schedule_;
  int next_to_finish_ = 0;
  double backward_start_ = 0.0;
  Status deferred_;  // a failure met inside backward, reported by Wait
  // Parameter gathers: per bucket, the collective in flight (null before
  // launch and once copied into place); they launch and finish from the last
  // bucket down.
  std::vector<std::shared_ptr<Work>> gather_work_, extras_work_;
  std::vector<Tensor> extras_;  // per bucket, the f32-read extras while their gather is in flight
  int next_gather_launch_ = -1, next_gather_finish_ = -1, gathers_in_flight_ = 0;
  Status gather_status_;        // the first gather failure, reported by FinishParameterGather
  double gather_waited_ = 0.0;  // seconds forward and Finish blocked on gathers, added to the next Wait's stats
  std::vector<Tensor> pool_;  // stage 2
  std::vector<Tensor> wire_pool_;  // stage 2 with compression
  std::vector<BucketTiming> timings_;
  std::unique_ptr<ShardedParameters> sharded_;  // stage 3
};

}  // namespace ddp
