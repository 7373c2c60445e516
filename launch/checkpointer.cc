#include "launch/checkpointer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/durable_files.h"

namespace ddp {
namespace {

constexpr char kManifest[] = "manifest.pb";
constexpr char kLatest[] = "latest";
constexpr char kTmpSuffix[] = ".tmp";

std::string Padded(int64_t value, int width) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%0*" PRId64, width, value);
  return buffer;
}

// Rank `rank`'s list of the files it wrote: "NAME SIZE CRC32" lines.
std::string FileListName(int rank) { return "rank" + Padded(rank, 5) + ".files"; }

bool IsCheckpointName(const std::string& name) {
  if (name.size() != 13 || name.rfind("step_", 0) != 0) return false;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

// Step directories in `dir`, oldest first (names sort by step); `sealed`:
// only those holding a manifest (complete, as a commit leaves them).
std::vector<std::string> StepDirectories(const std::string& dir, bool sealed) {
  std::vector<std::string> names;
  for (const std::string& entry : ListDirectory(dir)) {
    if (IsCheckpointName(entry) && (!sealed || PathExists(dir + "/" + entry + "/" + kManifest))) {
      names.push_back(entry);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string CheckpointName(int64_t step) { return "step_" + Padded(step, 8); }
std::string OptimizerShardName(int rank) { return "optimizer.rank" + Padded(rank, 5) + ".safetensors"; }

std::string ModelShardName(int rank) { return "model.rank" + Padded(rank, 5) + ".safetensors"; }

Checkpointer::Checkpointer(std::string dir, int rank, int keep, std::string crash_point)
    : dir_(std::move(dir)), rank_(rank), keep_(keep), crash_point_(std::move(crash_point)) {}

Checkpointer::~Checkpointer() {
  if (writer_.joinable()) writer_.join();
}

Status Checkpointer::PrepareDirectory(const std::string& dir, bool resuming) {
  const std::string where = "--checkpoint-dir " + dir;
  Status made = MakeDirectories(dir);
  if (!made.ok()) return Status(made.code(), where + ": " + made.message());
  if (!resuming && PathExists(dir + "/" + kLatest)) {
    StatusOr<std::string> latest = ReadWholeFile(dir + "/" + kLatest);
    std::string name = latest.ok() ? *latest : "?";
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return FailedPrecondition(where + " already holds checkpoints (latest: " + name +
                              "); pass --resume to continue from it, or use another directory");
  }
  if (!resuming) {
    // `latest` lost, the step directories not: a new run would overwrite them.
    const std::vector<std::string> steps = StepDirectories(dir, false);
    if (!steps.empty()) {
      return FailedPrecondition(where + " already holds checkpoints (" + steps.back() + ", no '" + kLatest +
                                "' file); pass --resume to continue from the newest, or use another directory");
    }
  }
  // Writable: a probe written durably and removed.
  const std::string probe = dir + "/.write_probe";
  Status probed = WriteFileDurably(probe, "ddp_train");
  if (!probed.ok()) return Status(probed.code(), where + " is not writable: " + probed.message());
  RETURN_IF_ERROR(RemoveTree(probe));
  for (const std::string& name : ListDirectory(dir)) {
    if (name.size() > 4 && name.compare(name.size() - 4, 4, kTmpSuffix) == 0) {
      RETURN_IF_ERROR(RemoveTree(dir + "/" + name));
    }
  }
  return Status::Ok();
}

void Checkpointer::CrashIf(const std::string& point) const {
  // "POINT", "POINT:RANK" or "POINT:RANK:STEP" (RANK -1: every rank).
  if (crash_point_.empty()) return;
  char where[32] = "";
  int rank = -1;
  long long step = -1;
  if (std::sscanf(crash_point_.c_str(), "%31[a-z]:%d:%lld", where, &rank, &step) < 1 || point != where) return;
  if ((rank >= 0 && rank != rank_) || (step >= 0 && step != pending_step_)) return;
  std::fprintf(stderr, "ddp_train: DDP_TEST_CHECKPOINT_CRASH: rank %d killed at '%s'\n", rank_, point.c_str());
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

void Checkpointer::Begin(CheckpointSnapshot snapshot) {
  CHECK(!pending_) << "a checkpoint is already being written (step " << pending_step_ << ")";
  if (writer_.joinable()) writer_.join();
  pending_ = true;
  pending_step_ = snapshot.step;
  pending_manifest_ = snapshot.manifest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    written_ = false;
    write_status_ = Status::Ok();
  }
  writer_ = std::thread([this, s = std::move(snapshot)]() mutable { Write(std::move(s)); });
}

void Checkpointer::Write(CheckpointSnapshot snapshot) {
  const std::string tmp = dir_ + "/" + CheckpointName(snapshot.step) + kTmpSuffix;
  auto run = [&]() -> Status {
    RETURN_IF_ERROR(MakeDirectories(tmp));
    std::string list;
    auto put = [&](const std::string& name, const std::vector<NamedTensor>& tensors,
                   const std::map<std::string, std::string>& metadata) -> Status {
      ASSIGN_OR_RETURN(const std::string bytes, SerializeSafetensors(tensors, metadata));
      RETURN_IF_ERROR(WriteFileDurably(tmp + "/" + name, bytes));
      list += name + " " + std::to_string(bytes.size()) + " " + std::to_string(Crc32(bytes.data(), bytes.size())) +
              "\n";
      return Status::Ok();
    };
    if (snapshot.writes_model) {
      std::map<std::string, std::string> metadata = snapshot.model_metadata;
      metadata["format"] = "pt";
      RETURN_IF_ERROR(put("model.safetensors", snapshot.model, metadata));
    }
    if (snapshot.writes_model_shard) RETURN_IF_ERROR(put(ModelShardName(rank_), snapshot.model_shard, {}));
    if (!snapshot.optimizer_file.empty()) {
      RETURN_IF_ERROR(put(snapshot.optimizer_file, snapshot.optimizer, snapshot.optimizer_metadata));
    }
    CrashIf("files");
    // The list last: its presence says this rank's files are complete.
    return WriteFileDurably(tmp + "/" + FileListName(rank_), list);
  };
  Status status = run();
  if (!status.ok()) {
    status = Status(status.code(), "checkpoint of step " + std::to_string(snapshot.step) + ": " + status.message());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    written_ = true;
    write_status_ = status;
  }
  cv_.notify_all();
}

bool Checkpointer::LocalDone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

Status Checkpointer::WaitLocal() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return written_; });
  return write_status_;
}

Status Checkpointer::Commit() {
  CHECK(pending_ && rank_ == 0) << "Checkpointer::Commit on rank " << rank_ << " without a pending checkpoint";
  const std::string name = CheckpointName(pending_step_);
  const std::string tmp = dir_ + "/" + name + kTmpSuffix, final_path = dir_ + "/" + name;
  auto run = [&]() -> Status {
    CheckpointManifest manifest = pending_manifest_;
    for (int r = 0; r < manifest.world_size(); ++r) {
      StatusOr<std::string> list = ReadWholeFile(tmp + "/" + FileListName(r));
      if (!list.ok()) return Status(StatusCode::kDataLoss, "rank " + std::to_string(r) + "'s files are missing: " +
                                                               list.status().message());
      std::istringstream lines(*list);
      std::string file;
      int64_t size = 0;
      uint64_t crc = 0;
      while (lines >> file >> size >> crc) {
        CheckpointFile* f = manifest.add_files();
        f->set_name(file);
        f->set_size(size);
        f->set_crc32(static_cast<uint32_t>(crc));
        f->set_rank(r);
      }
    }
    manifest.set_unix_time(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    SealedManifest sealed;
    sealed.set_manifest(manifest.SerializeAsString());
    sealed.set_crc32(Crc32(sealed.manifest().data(), sealed.manifest().size()));
    RETURN_IF_ERROR(WriteFileDurably(tmp + "/" + kManifest, sealed.SerializeAsString()));
    RETURN_IF_ERROR(SyncDirectory(tmp));
    CrashIf("manifest");
    // A directory of this step from an earlier attempt that never became
    // `latest` (the run crashed after renaming it) gives way.
    RETURN_IF_ERROR(RemoveTree(final_path));
    RETURN_IF_ERROR(RenameDurably(tmp, final_path));
    CrashIf("rename");
    RETURN_IF_ERROR(ReplaceFileAtomically(dir_ + "/" + kLatest, name + "\n"));
    // Steps past this one are left from an attempt that crashed after
    // renaming them and before `latest` named them (this run resumed from
    // an earlier one): never complete, removed. Then retention: the newest
    // `keep_` (names sort by step) stay.
    std::vector<std::string> complete;
    for (const std::string& entry : ListDirectory(dir_)) {
      if (!IsCheckpointName(entry)) continue;
      if (entry > name) {
        RETURN_IF_ERROR(RemoveTree(dir_ + "/" + entry));
      } else {
        complete.push_back(entry);
      }
    }
    for (size_t i = 0; keep_ > 0 && i + static_cast<size_t>(keep_) < complete.size(); ++i) {
      RETURN_IF_ERROR(RemoveTree(dir_ + "/" + complete[i]));
    }
    return Status::Ok();
  };
  Status status = run();
  Finish();
  if (!status.ok()) return Status(status.code(), "checkpoint " + final_path + ": " + status.message());
  return Status::Ok();
}

void Checkpointer::Finish() {
  if (writer_.joinable()) writer_.join();
  pending_ = false;
  pending_step_ = -1;
}

StatusOr<CheckpointReader> CheckpointReader::OpenLatest(const std::string& dir, std::string* note) {
  StatusOr<std::string> latest = ReadWholeFile(dir + "/" + kLatest);
  std::string why;  // why `latest` cannot be followed
  std::string name;
  if (!latest.ok()) {
    if (latest.status().code() != StatusCode::kNotFound) return latest.status();
    why = dir + "/" + kLatest + " is missing";
  } else {
    name = *latest;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (!IsCheckpointName(name)) {
      why = dir + "/" + kLatest + " names '" + name + "', not a checkpoint";
    } else if (!PathExists(dir + "/" + name)) {
      why = dir + "/" + kLatest + " names " + name + ", which is gone";
    } else {
      return Open(dir + "/" + name);
    }
  }
  // `latest` lost or stale: the newest sealed step directory stands in.
  const std::vector<std::string> sealed = StepDirectories(dir, true);
  if (sealed.empty()) {
    if (!latest.ok()) return Status(StatusCode::kNotFound, "no checkpoint in " + dir + " (no '" + kLatest + "' file)");
    return Status(StatusCode::kDataLoss, why + ", and no step directory there is sealed");
  }
  if (note != nullptr) *note = why + "; resuming from the newest sealed checkpoint, " + sealed.back();
  return Open(dir + "/" + sealed.back());
}

StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& path) {
  CheckpointReader reader;
  reader.path_ = path;
  StatusOr<std::string> bytes = ReadWholeFile(reader.path_ + "/" + kManifest);
  if (!bytes.ok()) {
    return Status(StatusCode::kDataLoss, "checkpoint " + reader.path_ + ": " + bytes.status().message());
  }
  SealedManifest sealed;
  if (!sealed.ParseFromString(*bytes) ||
      Crc32(sealed.manifest().data(), sealed.manifest().size()) != sealed.crc32() ||
      !reader.manifest_.ParseFromString(sealed.manifest())) {
    return Status(StatusCode::kDataLoss, "checkpoint " + reader.path_ + ": " + kManifest + " is corrupt");
  }
  return reader;
}

StatusOr<SafetensorsContents> CheckpointReader::ReadFile(const std::string& name) const {
  const std::string where = "checkpoint " + path_ + ": " + name;
  const CheckpointFile* entry = nullptr;
  for (const CheckpointFile& f : manifest_.files()) {
    if (f.name() == name) entry = &f;
  }
  if (entry == nullptr) return Status(StatusCode::kDataLoss, where + " is not in its manifest");
  StatusOr<std::string> bytes = ReadWholeFile(path_ + "/" + name);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status(StatusCode::kDataLoss, where + " is missing");
    return Status(StatusCode::kDataLoss, where + " cannot be read: " + bytes.status().message());
  }
  if (static_cast<int64_t>(bytes->size()) != entry->size()) {
    return Status(StatusCode::kDataLoss, where + " is " + std::to_string(bytes->size()) + " bytes, its manifest says " +
                                             std::to_string(entry->size()) + " (truncated?)");
  }
  if (Crc32(bytes->data(), bytes->size()) != entry->crc32()) {
    return Status(StatusCode::kDataLoss, where + " fails its CRC-32 check (corrupt)");
  }
  return ParseSafetensors(*bytes, path_ + "/" + name);
}

StatusOr<SafetensorsContents> ReadModelState(const CheckpointReader& reader) {
  ASSIGN_OR_RETURN(SafetensorsContents model, reader.ReadFile("model.safetensors"));
  const auto listed = model.metadata.find(kShardedParametersKey);
  if (listed == model.metadata.end()) return model;
  const Status malformed(StatusCode::kDataLoss,
                         "checkpoint " + reader.path() + ": model.safetensors: its list of sharded parameters is malformed");
  const nlohmann::json list = nlohmann::json::parse(listed->second, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return malformed;
  std::vector<std::string> files;
  for (const CheckpointFile& f : reader.manifest().files()) {
    if (f.name().rfind("model.rank", 0) == 0) files.push_back(f.name());
  }
  if (files.size() != static_cast<size_t>(reader.manifest().world_size())) {
    return Status(StatusCode::kDataLoss, "checkpoint " + reader.path() + " lists " + std::to_string(files.size()) +
                                             " model shards, expected " + std::to_string(reader.manifest().world_size()));
  }
  ASSIGN_OR_RETURN(const OptimizerStatePieces pieces, OptimizerStatePieces::Read(reader, files));
  for (const nlohmann::json& entry : list) {
    if (!entry.is_array() || entry.size() != 3 || !entry[0].is_string() || !entry[1].is_array() ||
        !entry[2].is_string()) {
      return malformed;
    }
    Shape shape;
    for (const nlohmann::json& d : entry[1]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return malformed;
      shape.push_back(d.get<int64_t>());
    }
    ASSIGN_OR_RETURN(const Tensor values, pieces.Assemble("master", entry[2].get<std::string>(), 0, NumElements(shape)));
    model.tensors.push_back({entry[0].get<std::string>(), values.View(0, shape)});
  }
  model.metadata.erase(kShardedParametersKey);
  return model;
}

StatusOr<OptimizerStatePieces> OptimizerStatePieces::Read(const CheckpointReader& reader,
                                                          const std::vector<std::string>& files) {
  OptimizerStatePieces out;
  out.where_ = "checkpoint " + reader.path();
  std::vector<std::string> names = files;
  if (names.empty()) {
    for (const CheckpointFile& f : reader.manifest().files()) {
      if (f.name().rfind("optimizer", 0) == 0) names.push_back(f.name());
    }
    const int32_t world = reader.manifest().world_size();
    const size_t expected = reader.manifest().zero_stage() > 0 ? static_cast<size_t>(world) : 1;
    if (names.size() != expected) {
      return Status(StatusCode::kDataLoss, out.where_ + " lists " + std::to_string(names.size()) +
                                               " optimizer files, expected " + std::to_string(expected));
    }
  }
  for (const std::string& file : names) {
    ASSIGN_OR_RETURN(SafetensorsContents contents, reader.ReadFile(file));
    for (NamedTensor& t : contents.tensors) {
      const size_t a = t.name.find(':'), b = a == std::string::npos ? a : t.name.find(':', a + 1);
      if (b == std::string::npos || t.tensor.dtype() != DType::kF32 ||
          t.name.find_first_not_of("0123456789", a + 1) != b || b == a + 1) {
        return InvalidArgument(out.where_ + ": " + file + ": tensor '" + t.name +
                               "' is not an f32 KIND:OFFSET:PARAM piece");
      }
      // Digits only (checked above), but as many as the file likes.
      int64_t offset = 0, end = 0;
      bool overflow = false;
      for (size_t i = a + 1; i < b; ++i) {
        overflow = overflow || __builtin_mul_overflow(offset, 10, &offset) ||
                   __builtin_add_overflow(offset, t.name[i] - '0', &offset);
      }
      if (overflow || __builtin_add_overflow(offset, t.tensor.numel(), &end)) {
        return InvalidArgument(out.where_ + ": " + file + ": tensor '" + t.name + "' ends past 2^63 elements");
      }
      const std::string kind = t.name.substr(0, a);
      if (std::find(out.kinds_.begin(), out.kinds_.end(), kind) == out.kinds_.end()) out.kinds_.push_back(kind);
      out.pieces_[{kind, t.name.substr(b + 1)}].emplace_back(offset, t.tensor);
    }
  }
  return out;
}

StatusOr<Tensor> OptimizerStatePieces::Assemble(const std::string& kind, const std::string& param, int64_t offset,
                                                int64_t numel) const {
  Tensor values = Tensor::Empty({numel}, DType::kF32);
  int64_t covered = 0;
  auto it = pieces_.find({kind, param});
  if (it != pieces_.end()) {
    for (const auto& [start, saved] : it->second) {
      const int64_t lo = std::max(start, offset), hi = std::min(start + saved.numel(), offset + numel);
      if (lo >= hi) continue;
      std::memcpy(values.data<float>() + (lo - offset), saved.data<float>() + (lo - start),
                  static_cast<size_t>(hi - lo) * sizeof(float));
      covered += hi - lo;
    }
  }
  if (covered != numel) {
    return InvalidArgument(where_ + " holds " + std::to_string(covered) + " of the " + std::to_string(numel) +
                           " values of " + kind + " for '" + param + "' from element " + std::to_string(offset));
  }
  return values;
}

}  // namespace ddp
