// Checkpoints (--checkpoint-dir, --checkpoint-every, --resume): a directory
// per step, step_00000010/, holding
//   manifest.pb                    the run's place and every file's CRC-32
//   model.safetensors              rank 0: parameters and buffers, PyTorch's names
//                                  (where ZeRO holds the f32 master weights in
//                                  shards: the buffers, and in its metadata the
//                                  parameters that
//   model.rank00003.safetensors    each rank's pieces of, "master:OFFSET:PARAM",
//                                  make up: ReadModelState joins them)
//   optimizer.safetensors          rank 0: the optimizer state (plain DDP:
//                                  every rank holds all of it), or
//   optimizer.rank00003.safetensors  each rank's shard under ZeRO
// and a `latest` file naming the newest complete one.
//
// Writing is asynchronous: at a step boundary the state is copied to host
// memory (the only stall), and a background thread writes this rank's files
// into step_N.tmp/, fsyncing each, with a list of their sizes and CRCs.
// Once every rank reports its files durable (the trainer learns this from
// the reduction each step already does), rank 0 seals the manifest, renames
// the directory into place, fsyncs its parent, replaces `latest`
// atomically and prunes old checkpoints. A crash at any moment leaves the
// previous checkpoint loadable; a torn or corrupt file is named at load.
//
// Optimizer state is stored per parameter piece, "KIND:OFFSET:PARAM"
// (KIND as PyTorch's state, OFFSET the piece's first element within the
// parameter), so a shard's tensors say which part of which parameter they
// hold whatever the ZeRO layout.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launch/checkpoint.pb.h"
#include "runtime/safetensors.h"
#include "runtime/status.h"

namespace ddp {

// What one rank writes for one checkpoint: host copies, taken at the step
// boundary, so training may change the live tensors meanwhile.
struct CheckpointSnapshot {
  int64_t step = 0;
  CheckpointManifest manifest;  // rank 0: everything but the files
  bool writes_model = false;           // rank 0
  std::vector<NamedTensor> model;      // rank 0
  std::map<std::string, std::string> model_metadata;  // rank 0
  bool writes_model_shard = false;       // where ZeRO shards the master weights
  std::vector<NamedTensor> model_shard;  // this rank's pieces of them (maybe none)
  std::vector<NamedTensor> optimizer;  // this rank's part (empty: none)
  std::string optimizer_file;          // its name in the checkpoint
  std::map<std::string, std::string> optimizer_metadata;
};

// The directory name of step `step`'s checkpoint.
std::string CheckpointName(int64_t step);
// Rank `rank`'s optimizer shard under ZeRO.
std::string OptimizerShardName(int rank);
// Rank `rank`'s pieces of the f32 master weights, where ZeRO shards them.
std::string ModelShardName(int rank);
// model.safetensors' metadata key listing the parameters held in the
// model shards: a JSON array of [name, shape, the parameter its pieces
// are named by] (a tied weight's second name lists the first).
inline constexpr const char* kShardedParametersKey = "ddp_train.sharded_parameters";

class Checkpointer {
 public:
  // `keep` > 0: how many complete checkpoints to keep (older ones are
  // removed after each commit). `crash_point` (a test hook, see
  // TrainOptions) kills this process at that point of the write.
  Checkpointer(std::string dir, int rank, int keep, std::string crash_point = "");
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Rank 0, before training: makes the directory, checks it is writable
  // and removes temporary directories a crashed run left. Without
  // `resuming`, a directory that already holds checkpoints is refused (a
  // new run would overwrite them).
  static Status PrepareDirectory(const std::string& dir, bool resuming);

  // Starts writing `snapshot` in the background. At most one checkpoint is
  // in flight: Commit or Abandon the previous first.
  void Begin(CheckpointSnapshot snapshot);
  bool pending() const { return pending_; }
  int64_t pending_step() const { return pending_step_; }
  // Whether this rank's files are written (or failed), without waiting.
  bool LocalDone() const;
  // Waits for this rank's files; their outcome.
  Status WaitLocal();
  // Rank 0, once every rank's files are durable: seals the manifest,
  // renames the directory into place, points `latest` at it and prunes.
  // Every rank then calls Finish (rank 0 inside Commit).
  Status Commit();
  // Forgets the pending checkpoint (its files stay in step_N.tmp/, removed
  // by the next run's PrepareDirectory).
  void Finish();

 private:
  void Write(CheckpointSnapshot snapshot);
  void CrashIf(const std::string& point) const;

  std::string dir_;
  int rank_;
  int keep_;
  std::string crash_point_;
  bool pending_ = false;
  int64_t pending_step_ = -1;
  CheckpointManifest pending_manifest_;  // rank 0
  std::thread writer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool written_ = false;
  Status write_status_;
};

// A complete checkpoint, opened for resuming: its manifest, checked against
// its seal. Files are read with ReadFile, which checks each against the
// manifest's size and CRC-32 first.
class CheckpointReader {
 public:
  // The checkpoint `latest` names in `dir`; NotFound when there is none.
  // Where `latest` is missing, or names a directory that is gone, the
  // newest step directory holding a manifest, and `note` says so.
  static StatusOr<CheckpointReader> OpenLatest(const std::string& dir, std::string* note = nullptr);
  // The checkpoint in directory `path` (a step_NNNNNNNN directory).
  static StatusOr<CheckpointReader> Open(const std::string& path);
  const CheckpointManifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }
  // Errors name the checkpoint and the file: missing, truncated, corrupt.
  StatusOr<SafetensorsContents> ReadFile(const std::string& name) const;

 private:
  std::string path_;
  CheckpointManifest manifest_;
};

// The model's state as model.safetensors holds it, with the parameters
// held in the model shards joined whole (any world size and bucket layout
// wrote them); errors name the checkpoint and the file.
class CheckpointReader;
StatusOr<SafetensorsContents> ReadModelState(const CheckpointReader& reader);

// A checkpoint's optimizer state as pieces of parameters, read from some
// of its files ("KIND:OFFSET:PARAM" tensors), assembled into any other
// split: a whole parameter, or another world's ZeRO piece.
class OptimizerStatePieces {
 public:
  // Every optimizer file of the checkpoint (the whole state, or every
  // rank's shard), or just `files`.
  static StatusOr<OptimizerStatePieces> Read(const CheckpointReader& reader,
                                             const std::vector<std::string>& files = {});
  // KIND's values for elements [offset, offset + numel) of `param`; an
  // error names them when the pieces do not cover them.
  StatusOr<Tensor> Assemble(const std::string& kind, const std::string& param, int64_t offset, int64_t numel) const;
  // Whether any piece of KIND for `param` is held.
  bool Has(const std::string& kind, const std::string& param) const { return pieces_.count({kind, param}) > 0; }
  // The kinds of state, in the order first seen.
  const std::vector<std::string>& kinds() const { return kinds_; }

 private:
  std::string where_;
  std::vector<std::string> kinds_;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, Tensor>>> pieces_;
};

}  // namespace ddp
