// The run's checkpoints (launch/checkpointer.h holds the format and its
// crash safety): --resume (the model's weights before the optimizer
// exists, then the optimizer's state, loss scale and step), when one is
// due, each snapshot's host copies for the background writer, and waiting
// for, agreeing on and committing a pending write on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/zero_reducer.h"
#include "launch/checkpointer.h"
#include "launch/progress.h"
#include "runtime/layers/model.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/optim/optimizer.h"
#include "runtime/status.h"

namespace ddp {

struct TrainCheckpointsOptions {
  std::string dir;          // --checkpoint-dir
  bool resume = false;      // --resume
  int64_t every = 0;        // --checkpoint-every (0: only on preemption)
  int keep = 0;             // --checkpoint-keep
  std::string crash_point;  // DDP_TEST_CHECKPOINT_CRASH (launch/fault_injection.h)
  std::string model, optimizer;
  uint64_t seed = 1;
  int64_t batch_size = 1, accumulation_steps = 1;
  int rank = 0, world_size = 1;
};

// Where one optimizer slot lies: its parameter and its first element there.
struct SlotPlace {
  std::string name;
  int64_t offset = 0, numel = 0;
};

// The live state a checkpoint holds, once the optimizer exists.
struct CheckpointedState {
  Model* model = nullptr;
  Optimizer* optimizer = nullptr;
  LossScaler* scaler = nullptr;
  ZeroReducer* zero = nullptr;  // null: plain DDP or one rank
  int zero_stage = 0;
  std::vector<SlotPlace> slots;  // in the optimizer's slot order
  int64_t global_batch = 0;
  double bucket_mb = 0.0, first_bucket_mb = 0.0;
};

class TrainCheckpoints {
 public:
  // Rank 0 prepares the directory now: a typo in the path costs seconds,
  // not a run. `comm` (null: one rank) agrees on writes; `progress` (rank
  // 0's step lines) ends its line before the commit's.
  static StatusOr<std::unique_ptr<TrainCheckpoints>> Create(TrainCheckpointsOptions options, Communicator* comm,
                                                            ProgressPrinter* progress);

  // --resume: the newest sealed checkpoint's weights into `model`, checked
  // against this run (model, global batch, optimizer, steps left). Returns
  // the step to start at: 0 without --resume or without a checkpoint yet.
  StatusOr<int64_t> ResumeModel(Model& model, int64_t global_batch, int64_t total_steps);
  // The checkpoint resumed from, or null.
  const CheckpointReader* resumed() const { return resumed_ ? &*resumed_ : nullptr; }

  // What later checkpoints hold; the host buffers they copy into are made
  // (and touched) now, so a checkpoint's stall is only the copy.
  void Attach(CheckpointedState state);
  // After Attach, when resuming: the optimizer's state, its step count and
  // the loss scale from the checkpoint, resharded where the layout differs.
  Status ResumeOptimizer();

  // Whether the state after 1-based step `step` is to be checkpointed:
  // every --checkpoint-every steps, and on a stop (preemption).
  bool Due(int64_t step, bool stopping) const { return stopping || (options_.every > 0 && step % options_.every == 0); }
  // Starts the checkpoint of the state after `step`: the previous one
  // finished first, then host copies handed to the background writer.
  Status Begin(int64_t step);
  bool pending() const { return writer_.pending(); }
  int64_t pending_step() const { return writer_.pending_step(); }
  // This rank's part of the pending write, without waiting: done (its
  // files durable), and the write's error if it failed.
  struct LocalWrite {
    bool durable = false;
    Status status;
  };
  LocalWrite PollLocal();
  // Every rank's files durable (the step's votes said so): rank 0 commits
  // and says where; the others let it go. Rank 0's commit error, if any.
  Status Commit();
  // Collective: waits until every rank's files are durable, agrees the
  // write succeeded everywhere, and commits.
  Status Finish();

 private:
  TrainCheckpoints(TrainCheckpointsOptions options, Communicator* comm, ProgressPrinter* progress);
  bool is_root() const { return options_.rank == 0; }
  Tensor Stage(size_t index, const Tensor& t);
  // The model's part of a snapshot, staged from `index` on.
  void StageModel(CheckpointSnapshot* snapshot, size_t* index);
  StatusOr<CheckpointSnapshot> Snapshot(int64_t step);

  TrainCheckpointsOptions options_;
  Communicator* comm_;
  ProgressPrinter* progress_;
  Checkpointer writer_;
  std::optional<CheckpointReader> resumed_;
  int64_t start_step_ = 0;
  CheckpointedState state_;
  // Host buffers the snapshot copies into, one per tensor it copies.
  std::vector<Tensor> staging_;
  // Where ZeRO holds the f32 master weights in shards: this rank's pieces,
  // one per optimizer slot (state_.slots).
  std::vector<Tensor> master_pieces_;
  bool masters_sharded_ = false;
};

}  // namespace ddp
