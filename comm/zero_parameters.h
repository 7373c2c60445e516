// ZeRO's sharded parameters (comm/zero_reducer.h shards the gradients and
// the optimizer state alike): each rank keeps the f32 master values of its
// pieces only, piece r of every bucket, the same pieces its gradients and
// optimizer state cover. The model's flat parameter buffer is released.
// Under mixed precision at stages 1 and 2 that is all this class does (the
// 16-bit working copy stays whole: Shard, piece, Materialize, Release).
// Stage 3 (below) shards the working parameters too: a
// bucket group (comm/buckets.h: one bucket, or the buckets of a split
// parameter) is all-gathered, whole, into a buffer of its own when a
// layer's forward or backward first reads one of its parameters
// (GradientReadyHook::PrepareParameter), and the parameters' values view
// that buffer while the group is resident. Below, "bucket" means group.
//
// A demand that follows the previous one in the direction the pass travels
// (forward reads the flat space upwards, so bucket indices go down;
// backward goes up) evicts every bucket behind the previous one (a layer
// may straddle the two) and starts the gathers of the next `prefetch`
// buckets, which then arrive while this one computes. A demand out of that
// order (BERT's tied decoder reading the word embeddings) gathers what it
// needs, evicted again once the pass is back in order. Evicting
// leaves the parameters' values undefined and gives the memory back to the
// allocator, so a rank holds about `prefetch` + 2 gathered buckets, and
// never more than `prefetch` + 3 (the least recently used goes first).
// The pass starts over at each forward and backward (SetPass), so the
// forward's last buckets serve the backward's first. After the optimizer
// step every gathered bucket is stale: all are evicted and the forward's
// first buckets start.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/buckets.h"
#include "comm/communicator.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

// Under mixed precision a bucket's 16-bit gather carries the working copy,
// and the parameters the forward reads in f32 (Parameter::forward_reads_f32:
// norms, biases, embedding tables) travel beside it in f32: each rank packs
// its piece's elements of them into its block of an extras buffer (`shard`
// elements each), which is all-gathered and unpacked into their values.
struct F32Reads {
  struct Run {
    int64_t bucket_offset, length;  // in the bucket
    int64_t packed_offset;          // in the rank's block
    const Parameter* param;
    int64_t param_offset;  // where the run starts in the parameter
  };
  std::vector<std::vector<Run>> runs;  // per rank
  int64_t shard = 0;                   // the most elements a rank packs

  // The runs of bucket `plan`, split among `world` ranks in pieces of
  // `piece_shard` elements; `offsets`: FlatOffsets.
  static F32Reads Plan(const BucketPlan& plan, int64_t piece_shard, int world,
                       const std::unordered_map<const Parameter*, int64_t>& offsets);
  // This rank's runs, from its f32 master `piece` into its `block`.
  void Pack(ExecutionContext& ctx, int rank, int64_t piece_shard, const Tensor& piece, Tensor block) const;
  // Starts gathering them: this rank's runs, from its f32 master `piece`,
  // packed into its block of `all` (made here, world blocks).
  std::shared_ptr<Work> Gather(ExecutionContext& ctx, Communicator* comm, int64_t piece_shard, const Tensor& piece,
                               Tensor* all) const;
  // Every rank's runs, from the gathered `all` (world blocks) into the
  // parameters' values.
  void Unpack(ExecutionContext& ctx, const Tensor& all) const;
};

class ShardedParameters {
 public:
  enum class Pass { kForward, kBackward };

  // `plans`: the gradient buckets (comm/buckets.h), whose padded shards
  // these pieces follow, and `groups`, GroupBuckets of them. Allocates the
  // pieces; the model keeps its flat parameters until Shard. With
  // `working_too` (stage 3) the working parameters are sharded as well:
  // under mixed precision a group is gathered in the model's 16-bit dtype,
  // into its weights' 16-bit copies, with the f32-read parameters beside
  // it (F32Reads).
  ShardedParameters(Communicator* comm, Model* model, const std::vector<BucketPlan>& plans,
                    const std::vector<BucketGroup>& groups, bool working_too, int prefetch,
                    const ExecutionContext& ctx);
  ~ShardedParameters();

  // Copies this rank's pieces out of the model's flat parameters and
  // releases those (at start-up; the first Demand does it otherwise).
  // Once. With `from_root`, rank 0's values: each bucket is broadcast from
  // it in turn, through a buffer of one bucket on the device where the
  // flat parameters stayed on the host (Model::MoveParts), and each rank
  // keeps its piece, so no device holds the whole model.
  Status Shard(bool from_root = false);
  // This rank's master piece of bucket k: its `shard` elements, of which
  // the first `owned` are parameters (the rest padding).
  const Tensor& piece(int k) const { return buckets_[k].piece; }

  // Before the pass's first demand: which way its demands travel.
  void SetPass(Pass pass);
  // Group g's parameters current in their values, and the next groups'
  // gathers started (see above).
  void Demand(int g);
  // After the optimizer updated the pieces: every gathered bucket evicted,
  // the forward's first `prefetch` + 1 gathers started.
  void AfterUpdate();
  // Every gather in flight arrived; the first failure since the last call.
  Status Finish();
  // Every parameter gathered into one flat buffer the model adopts (which
  // rebuilds a 16-bit copy it gave up), for what reads them all at once
  // (evaluation); current until Release or the next update. Demands are
  // then served from it.
  Status Materialize();
  void Release();
  // Each bucket's f32 master values gathered whole, one bucket at a time,
  // and handed to `visit` with the bucket's plan (the first `numel` values;
  // writing a file of them: every rank takes part). Every bucket goes round
  // whatever `visit` answers, so no rank leaves the others in a
  // collective; the first failure, of a gather or of `visit`.
  using BucketVisitor = std::function<Status(const BucketPlan& plan, const Tensor& values)>;
  Status ForEachGatheredBucket(const BucketVisitor& visit);

  // Seconds demands blocked on gathers since the last call.
  double TakeWaited();
  // This rank's f32 pieces.
  int64_t piece_bytes() const;
  // The most bytes of gathered groups held at once (Materialize aside).
  int64_t gathered_peak_bytes() const { return gathered_peak_; }

 private:
  struct Bucket {
    BucketPlan plan;
    int64_t shard = 0, owned = 0;
    Tensor piece;  // this rank's master values, shard elements
    F32Reads f32_reads;  // 16-bit gathers
    Tensor extras;       // its f32 reads' gather, while in flight
  };
  struct Group {
    BucketGroup layout;
    Tensor gathered;  // the group's buffer while resident (16-bit gathers: the weights' copies)
    // 16-bit gathers, once arrived: the f32-read parameters' values, and
    // the rearranged (channels-last) weights' copies.
    Tensor f32_values;
    std::vector<Tensor> rearranged;
    bool placed = false;
    std::vector<std::shared_ptr<Work>> work;  // its buckets' gathers, until they arrived
    uint64_t used = 0;  // when last demanded or prefetched
    bool jump = false;  // demanded out of the pass's order
  };
  void Launch(int g);
  // Starts gathering bucket k's pieces into `whole` (its shard x world
  // elements, f32, or 16-bit: rounded); `why` is added to the watchdog's
  // label.
  std::shared_ptr<Work> Gather(int k, const std::string& why, Tensor whole);
  // 16-bit gathers, once group g arrived: the f32 reads unpacked into
  // their values, rearranged weights converted.
  void Place(int g);
  int64_t GroupBytes(const Group& g) const;
  bool low() const { return low_ != DType::kF32; }
  // Where the pass's group indices go: forward reads them downwards.
  int direction() const { return pass_ == Pass::kForward ? -1 : 1; }
  // Group g's gathers in flight arrived (a failure kept for Finish).
  void WaitFor(int g);
  // And, with 16-bit gathers, placed.
  void Arrive(int g);
  void Evict(int g);
  void EvictAll();
  // The next `prefetch_` groups after g in this pass's direction.
  void Prefetch(int g);
  int num_groups() const { return static_cast<int>(groups_.size()); }

  Communicator* comm_;
  Model* model_;
  ExecutionContext ctx_;
  int prefetch_;
  bool working_too_;
  DType low_ = DType::kF32;  // stage 3 under mixed precision: the gathers' dtype
  std::vector<Bucket> buckets_;
  std::vector<Group> groups_;
  std::unordered_map<const Parameter*, int64_t> flat_offset_;
  bool sharded_ = false, materialized_ = false;
  Pass pass_ = Pass::kForward;
  int last_ = -1;  // the pass's last demanded group (-1: none yet)
  int resident_ = 0;
  int64_t gathered_ = 0, gathered_peak_ = 0;  // bytes of resident groups
  uint64_t clock_ = 0;
  double waited_ = 0.0;
  Status status_;  // the first gather failure, reported by Finish
};

}  // namespace ddp
