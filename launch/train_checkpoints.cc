#include "launch/train_checkpoints.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "comm/watchdog.h"
#include "launch/step_agreement.h"

namespace ddp {
namespace {

// "KIND:OFFSET:PARAM": a piece of a parameter's optimizer state.
std::string StateKey(const std::string& kind, int64_t offset, const std::string& param) {
  return kind + ":" + std::to_string(offset) + ":" + param;
}

}  // namespace

TrainCheckpoints::TrainCheckpoints(TrainCheckpointsOptions options, Communicator* comm, ProgressPrinter* progress)
    : options_(std::move(options)),
      comm_(comm),
      progress_(progress),
      writer_(options_.dir, options_.rank, options_.keep, options_.crash_point) {}

StatusOr<std::unique_ptr<TrainCheckpoints>> TrainCheckpoints::Create(TrainCheckpointsOptions options,
                                                                     Communicator* comm, ProgressPrinter* progress) {
  if (options.rank == 0) RETURN_IF_ERROR(Checkpointer::PrepareDirectory(options.dir, options.resume));
  return std::unique_ptr<TrainCheckpoints>(new TrainCheckpoints(std::move(options), comm, progress));
}

StatusOr<int64_t> TrainCheckpoints::ResumeModel(Model& model, int64_t global_batch, int64_t total_steps) {
  if (!options_.resume) return int64_t{0};
  std::string note;
  StatusOr<CheckpointReader> reader = CheckpointReader::OpenLatest(options_.dir, &note);
  if (!note.empty() && is_root()) std::printf("ddp_train: --resume: %s\n", note.c_str());
  if (!reader.ok()) {
    if (reader.status().code() != StatusCode::kNotFound) {
      return Status(reader.status().code(), "--resume: " + reader.status().message());
    }
    if (is_root()) std::printf("ddp_train: --resume: no checkpoint in %s yet; starting from step 0\n", options_.dir.c_str());
    return int64_t{0};
  }
  const CheckpointManifest& m = reader->manifest();
  const std::string where = "--resume: checkpoint " + reader->path();
  auto differs = [&](const std::string& what, const std::string& theirs, const std::string& ours) {
    return InvalidArgument(where + " was written with " + what + " " + theirs + ", this run has " + ours);
  };
  if (m.model() != options_.model) return differs("--model", m.model(), options_.model);
  // Another world size, split of the batch or ZeRO stage is fine (the
  // optimizer state is stored per parameter piece, and the data position
  // in samples): the global batch must stay, so each step takes the same
  // samples and the run follows the equivalence contract.
  const int64_t written_global = m.world_size() * m.accumulation_steps() * m.batch_size();
  if (written_global != global_batch) {
    return InvalidArgument(where + " was written at a global batch of " + std::to_string(written_global) + " (" +
                           std::to_string(m.world_size()) + " ranks x " + std::to_string(m.accumulation_steps()) +
                           " micro-batches x " + std::to_string(m.batch_size()) + "), this run's is " +
                           std::to_string(global_batch) + " (" + std::to_string(options_.world_size) + " x " +
                           std::to_string(options_.accumulation_steps) + " x " + std::to_string(options_.batch_size) +
                           "); keep ranks x --accumulation-steps x --batch-size");
  }
  if (m.samples() != m.step() * global_batch) {
    return InvalidArgument(where + ": its data position, " + std::to_string(m.samples()) + " samples, is not step " +
                           std::to_string(m.step()) + " x the global batch " + std::to_string(global_batch));
  }
  if (m.optimizer() != options_.optimizer) return differs("--optimizer", m.optimizer(), options_.optimizer);
  if (m.step() >= total_steps) {
    return InvalidArgument(where + " is at step " + std::to_string(m.step()) + ", and this run ends at step " +
                           std::to_string(total_steps) + ": nothing is left to train");
  }
  StatusOr<SafetensorsContents> weights = ReadModelState(*reader);
  if (!weights.ok()) return Status(weights.status().code(), "--resume: " + weights.status().message());
  std::vector<std::pair<std::string, Tensor>> named;
  for (NamedTensor& t : weights->tensors) named.emplace_back(t.name, t.tensor);
  const Status loaded = model.LoadStateDict(named);
  if (!loaded.ok()) return InvalidArgument(where + ": model.safetensors: " + loaded.message());
  start_step_ = m.step();
  resumed_ = std::move(*reader);
  return start_step_;
}

void TrainCheckpoints::Attach(CheckpointedState state) {
  state_ = std::move(state);
  // What Snapshot copies, in its order; the copies now also fault the
  // pages in.
  masters_sharded_ = state_.zero != nullptr && state_.zero->shards_masters();
  if (masters_sharded_) {
    for (const OptimizerSlot& slot : state_.zero->OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      master_pieces_.push_back(slot.value);
    }
  }
  size_t index = 0;
  CheckpointSnapshot unused;
  StageModel(&unused, &index);
  if (state_.zero != nullptr || is_root()) {
    for (const Tensor& t : state_.optimizer->state()) Stage(index++, t);
  }
}

Status TrainCheckpoints::ResumeOptimizer() {
  if (!resumed_) return Status::Ok();
  const CheckpointManifest& m = resumed_->manifest();
  // Written by the same layout: this rank's own file (its shard under
  // ZeRO; the whole state, which rank 0 wrote, otherwise). Resharded:
  // every optimizer file of the checkpoint, each slot assembled from the
  // pieces that cover it.
  std::vector<std::string> files;
  const bool zero = state_.zero != nullptr;
  // ZeRO's pieces follow the bucket layout, which its fingerprint names
  // (checkpoints from before it was recorded hold 0: read as resharded).
  const bool same_buckets = zero && m.zero_layout() == state_.zero->layout_fingerprint();
  if (m.world_size() == options_.world_size && m.zero_stage() == state_.zero_stage && (same_buckets || !zero)) {
    files.push_back(zero ? OptimizerShardName(options_.rank) : "optimizer.safetensors");
  }
  StatusOr<OptimizerStatePieces> pieces = OptimizerStatePieces::Read(*resumed_, files);
  if (!pieces.ok()) return Status(pieces.status().code(), "--resume: " + pieces.status().message());
  const std::vector<std::string> kinds = state_.optimizer->state_names();
  std::vector<Tensor> state = state_.optimizer->state();
  const size_t slots = state_.slots.size();
  CHECK_EQ(state.size(), kinds.size() * slots) << "optimizer state layout";
  for (size_t k = 0; k < kinds.size(); ++k) {
    for (size_t i = 0; i < slots; ++i) {
      const SlotPlace& place = state_.slots[i];
      StatusOr<Tensor> values = pieces->Assemble(kinds[k], place.name, place.offset, place.numel);
      if (!values.ok()) return Status(values.status().code(), "--resume: " + values.status().message());
      state[k * slots + i].CopyFrom(*values);
    }
  }
  state_.optimizer->set_steps(m.optimizer_steps());
  state_.scaler->Restore(m.loss_scale(), m.loss_scale_growth_tracker(), m.skipped_steps());
  if (is_root()) {
    std::printf("ddp_train: --resume: continuing from %s at step %lld\n", resumed_->path().c_str(),
                static_cast<long long>(start_step_));
  }
  return Status::Ok();
}

Tensor TrainCheckpoints::Stage(size_t index, const Tensor& t) {
  if (staging_.size() <= index) staging_.resize(index + 1);
  Tensor& buffer = staging_[index];
  if (!buffer.defined() || buffer.shape() != t.shape() || buffer.dtype() != t.dtype() || buffer.format() != t.format()) {
    buffer = Tensor::Empty(t.shape(), t.dtype(), Device::Cpu(), t.format());
  }
  buffer.CopyFrom(t);
  return buffer;
}

void TrainCheckpoints::StageModel(CheckpointSnapshot* snapshot, size_t* index) {
  snapshot->writes_model = is_root();
  snapshot->writes_model_shard = masters_sharded_;
  if (!masters_sharded_) {
    if (!is_root()) return;
    for (const auto& [name, t] : state_.model->StateDict()) snapshot->model.push_back({name, Stage((*index)++, t)});
    return;
  }
  // Where ZeRO holds the f32 master weights in shards, each rank writes its
  // own pieces; rank 0's model file holds the buffers and the list of the
  // parameters the pieces make up.
  for (size_t i = 0; i < master_pieces_.size(); ++i) {
    const SlotPlace& place = state_.slots[i];
    snapshot->model_shard.push_back({StateKey("master", place.offset, place.name), Stage((*index)++, master_pieces_[i])});
  }
  if (!is_root()) return;
  nlohmann::json list = nlohmann::json::array();
  for (const Model::StateSource& s : state_.model->StateSources()) {
    if (s.param != nullptr) {
      list.push_back({s.name, s.param->shape, s.param->name});
    } else {
      snapshot->model.push_back({s.name, Stage((*index)++, s.buffer)});
    }
  }
  snapshot->model_metadata[kShardedParametersKey] = list.dump();
}

StatusOr<CheckpointSnapshot> TrainCheckpoints::Snapshot(int64_t step) {
  CheckpointSnapshot snapshot;
  snapshot.step = step;
  ZeroReducer* zero = state_.zero;
  // The gathers of this step's update land first.
  if (zero != nullptr) RETURN_IF_ERROR(zero->FinishParameterGather());
  Optimizer& optimizer = *state_.optimizer;
  if (is_root()) {
    CheckpointManifest& m = snapshot.manifest;
    m.set_format_version(1);
    m.set_model(options_.model);
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);
    for (const gflags::CommandLineFlagInfo& f : flags) {
      if (!f.is_default) (*m.mutable_flags())[f.name] = f.current_value;
    }
    m.set_step(step);
    m.set_samples(step * state_.global_batch);
    m.set_world_size(options_.world_size);
    m.set_batch_size(options_.batch_size);
    m.set_accumulation_steps(options_.accumulation_steps);
    m.set_zero_stage(state_.zero_stage);
    m.set_bucket_mb(state_.bucket_mb);
    m.set_first_bucket_mb(state_.first_bucket_mb);
    if (zero != nullptr) m.set_zero_layout(zero->layout_fingerprint());
    m.set_optimizer(options_.optimizer);
    m.set_optimizer_steps(optimizer.steps());
    m.set_seed(options_.seed);
    m.set_loss_scale(state_.scaler->scale());
    m.set_loss_scale_growth_tracker(state_.scaler->growth_tracker());
    m.set_skipped_steps(state_.scaler->skipped_steps());
  }
  // Copies into the staging buffers (the writer reads them; the next
  // snapshot waits for it).
  size_t index = 0;
  StageModel(&snapshot, &index);
  if (zero != nullptr || is_root()) {
    snapshot.optimizer_file = zero != nullptr ? OptimizerShardName(options_.rank) : "optimizer.safetensors";
    const std::vector<std::string> kinds = optimizer.state_names();
    const std::vector<Tensor> state = optimizer.state();
    const size_t slots = state_.slots.size();
    for (size_t k = 0; k < kinds.size(); ++k) {
      for (size_t i = 0; i < slots; ++i) {
        const SlotPlace& place = state_.slots[i];
        snapshot.optimizer.push_back({StateKey(kinds[k], place.offset, place.name), Stage(index++, state[k * slots + i])});
      }
    }
    snapshot.optimizer_metadata = {{"optimizer", options_.optimizer},
                                   {"steps", std::to_string(optimizer.steps())},
                                   {"rank", std::to_string(options_.rank)}};
  }
  return snapshot;
}

Status TrainCheckpoints::Begin(int64_t step) {
  if (writer_.pending()) RETURN_IF_ERROR(Finish());
  ASSIGN_OR_RETURN(CheckpointSnapshot snapshot, Snapshot(step));
  writer_.Begin(std::move(snapshot));
  return Status::Ok();
}

TrainCheckpoints::LocalWrite TrainCheckpoints::PollLocal() {
  LocalWrite mine;
  mine.durable = writer_.pending() && writer_.LocalDone();
  if (mine.durable) mine.status = writer_.WaitLocal();
  return mine;
}

Status TrainCheckpoints::Commit() {
  if (!is_root()) {
    writer_.Finish();
    return Status::Ok();
  }
  const int64_t step = writer_.pending_step();
  RETURN_IF_ERROR(writer_.Commit());
  progress_->EndLine();
  std::printf("checkpoint: step %lld written to %s/%s\n", static_cast<long long>(step), options_.dir.c_str(),
              CheckpointName(step).c_str());
  std::fflush(stdout);
  return Status::Ok();
}

Status TrainCheckpoints::Finish() {
  const int64_t step = writer_.pending_step();
  // Decided together: no rank commits, or goes on, alone.
  // Every rank's files written: asked in short all-reduces, so no rank sits
  // inside one (where the collective watchdog times it) while another
  // writes gigabytes.
  while (comm_ != nullptr) {
    const bool done = writer_.LocalDone();
    Tensor count = Tensor::FromVector<double>({done ? 1.0 : 0.0}, {1});
    const CollectiveLabel label("the poll of every rank's checkpoint files");
    RETURN_IF_ERROR(comm_->AllReduce(count, ReduceOp::kSum)->Wait());
    if (count.data<double>()[0] == static_cast<double>(options_.world_size)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RETURN_IF_ERROR(AgreeOnStatus(comm_, writer_.WaitLocal(),
                                "another rank failed to write the checkpoint of step " + std::to_string(step) +
                                    "; stopping"));
  return AgreeOnStatus(comm_, Commit(),
                       "rank 0 failed to commit the checkpoint of step " + std::to_string(step) + "; stopping");
}

}  // namespace ddp
