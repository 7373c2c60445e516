// The gradient Reducer (PyTorch DDP's design): decides what to reduce and
// when; the Communicator decides how.
//
// Buckets follow the model's static backward order: byte-capped
// (--first-bucket-mb for the first, --bucket-mb after), a parameter larger
// than --bucket-mb split into buckets of its own (comm/buckets.h). Because
// backward order is the reverse of registration order, each bucket is one
// contiguous range of the model's flat gradient buffer: its view needs no
// copy. As a parameter's gradient becomes final the layer
// fires MarkGradientReady; a complete bucket launches an asynchronous
// average as soon as every lower-numbered bucket has launched, so buckets
// always go out in index order and every rank issues the same sequence.
// Compressed, each bucket is cast into one of a few (kWireBuffers) 16-bit
// buffers of the largest bucket's size, taken in turn: bucket k waits for
// bucket k - kWireBuffers to arrive and be widened back before it reuses
// that buffer, so the wire never holds a copy of the whole model.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/bucket_schedule.h"
#include "comm/buckets.h"
#include "comm/communicator.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"

namespace ddp {

struct ReducerOptions : BucketOptions {
  // The caller already divided its gradients by the world size (by scaling
  // the loss gradient), so buckets are summed: PyTorch DDP's pre-division,
  // without a pass over every bucket after it arrives.
  bool gradients_prescaled = false;
  // Where compression casts run: the gradients' device and stream (a copy
  // of the trainer's context shares its stream and scratch memory).
  ExecutionContext ctx = ExecutionContext::Cpu();
};

struct BucketTiming {
  double launched = 0.0;  // seconds after backward began
  // When its collective finished, same clock; -1 where the host never saw
  // it finish (NCCL: the compute stream waits for it, not the host).
  double finished = 0.0;
  double waited = 0.0;    // how long Wait() blocked on it
};

struct ReduceStats {
  // Seconds the compute thread spent on communication it could not hide:
  // blocked in Wait(), plus casting for compression.
  double exposed_seconds = 0.0;
  std::vector<BucketTiming> buckets;
  double backward_start = 0.0;  // SteadySeconds() when backward began: the buckets' clock's zero
};

// Seconds after `start` that `work` finished, or -1 when unknown.
inline double FinishedAfter(Work& work, double start) {
  const double finished = work.IsCompleted() ? work.timing().finished : 0.0;
  return finished > 0.0 ? finished - start : -1.0;
}

class Reducer : public GradientReadyHook {
 public:
  // Its plan (parameters in backward order; offset and numel: its range in
  // the flat gradient buffer) and what reducing it takes.
  struct Bucket : BucketPlan {
    Tensor grads;                    // view of that range
    Tensor wire;                     // compressed: its buffer of the wire pool while in flight
    std::shared_ptr<Work> work;
    double launched = 0.0;
  };

  // Installs itself as the model's gradient-ready hook.
  Reducer(Communicator* comm, Model* model, const ReducerOptions& options);
  ~Reducer() override;

  // Call before each backward: `sync` false (a micro-batch that is not the
  // last of its step) keeps gradients local, as DDP's no_sync.
  void PrepareForBackward(bool sync);
  void MarkGradientReady(Parameter& param) override;
  // After a synchronized backward: every gradient is the average over ranks.
  // Fails (on every rank alike) if the observed gradient-ready order differs
  // from the static backward order on any rank, or a collective failed.
  StatusOr<ReduceStats> Wait();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The 16-bit wire buffers (0 uncompressed).
  int64_t wire_bytes() const;
  static constexpr int kWireBuffers = 3;

 private:
  void Launch(Bucket& bucket);
  // Waits for bucket k's all-reduce and widens a compressed one back.
  Status Finish(int k);

  Communicator* comm_;
  Model* model_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<BucketSchedule> schedule_;
  bool sync_ = false;
  double backward_start_ = 0.0;
  double cast_seconds_ = 0.0;
  std::vector<Tensor> wire_pool_;  // compressed: kWireBuffers buffers
  std::vector<BucketTiming> timings_;
  int next_to_finish_ = 0;
  Status deferred_;  // a failure met while reusing a wire buffer, reported by Wait
};

}  // namespace ddp
