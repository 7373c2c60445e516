// ZeRO stage 1 (Megatron's distributed-optimizer layout): the flat parameter
// space is split per bucket, each bucket padded to a multiple of the world
// size, and rank r owns piece r of every bucket. Gradients live in padded
// bucket buffers (each parameter's grad is a view into one); as a bucket
// completes during backward it is reduce-scattered, so each rank ends up
// with the summed gradient of its pieces, in place in its bucket buffers.
// The optimizer sees only this rank's pieces (OptimizerSlots), so its state
// is 1/N; after the update the pieces are all-gathered back into the full
// parameters, bucket by bucket. Never falls back to unsharded.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "runtime/layers/model.h"
#include "runtime/optim/optimizer.h"

namespace ddp {

struct ZeroOptions {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool overlap = true;
};

class ZeroReducer : public GradientReadyHook {
 public:
  struct Bucket {
    std::vector<Parameter*> params;  // backward order
    int64_t offset = 0, numel = 0;   // range in the flat parameter space
    int64_t shard = 0;               // padded numel / world
    int64_t owned = 0;               // this rank's elements inside numel (0 <= owned <= shard)
    Tensor grads;                    // padded bucket buffer: world * shard
    Tensor scattered;                // transient reduce-scatter output, shard elements
    int pending = 0;
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

  void PrepareForBackward(bool sync);
  void MarkGradientReady(Parameter& param) override;
  // After a synchronized backward: this rank's pieces hold the summed
  // gradients (the rest of the bucket buffers is stale).
  StatusOr<ReduceStats> Wait();
  // The squared global gradient norm: the sum of every rank's pieces'.
  StatusOr<double> GlobalGradientSquaredNorm(ExecutionContext& ctx);
  // Scales this rank's gradient pieces (clipping).
  void ScaleGradients(ExecutionContext& ctx, float scale);
  // After the optimizer updated this rank's pieces: every rank gets the full
  // updated parameters.
  Status AllGatherParameters();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Persistent gradient bytes (the padded bucket buffers).
  int64_t gradient_bytes() const;

 private:
  void Launch(Bucket& bucket);
  Tensor OwnedGradients(const Bucket& b) const { return b.grads.View(comm_->rank() * b.shard, {b.owned}); }

  Communicator* comm_;
  Model* model_;
  ZeroOptions options_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const Parameter*, int> bucket_of_;
  std::unordered_map<const Parameter*, int64_t> flat_offset_;
  bool sync_ = false;
  int next_to_launch_ = 0;
  double backward_start_ = 0.0;
};

}  // namespace ddp
