#include "runtime/tensorboard.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/crc32c.h"
#include "runtime/durable_files.h"
#include "runtime/tensorboard_event.pb.h"

namespace ddp {
namespace {

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status TensorBoardWriter::Open(const std::string& dir) {
  if (Status made = MakeDirectories(dir); !made.ok()) return FailedPrecondition("--tensorboard-dir " + made.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(WallTime())) + "." + host;
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    return FailedPrecondition("--tensorboard-dir " + dir + ": cannot create " + path_ + ": " + std::strerror(errno));
  }
  tensorboard::Event first;
  first.set_wall_time(WallTime());
  first.set_file_version("brain.Event:2");
  return WriteRecord(first.SerializeAsString());
}

Status TensorBoardWriter::AddScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  if (file_ == nullptr) return Status::Ok();
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return WriteRecord(event.SerializeAsString());
}

Status TensorBoardWriter::WriteRecord(const std::string& data) {
  const uint64_t length = data.size();
  char header[12];
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = MaskCrc32c(Crc32c(header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t data_crc = MaskCrc32c(Crc32c(data.data(), data.size()));
  if (std::fwrite(header, 1, 12, file_) != 12 || std::fwrite(data.data(), 1, data.size(), file_) != data.size() ||
      std::fwrite(&data_crc, 1, 4, file_) != 4 || std::fflush(file_) != 0) {
    return FailedPrecondition("--tensorboard-dir: writing " + path_ + " failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = path + ": record " + std::to_string(records.size()) + " at byte " + std::to_string(at);
    if (bytes.size() - at < 12) return InvalidArgument(where + ": truncated header");
    uint64_t length;
    std::memcpy(&length, bytes.data() + at, 8);
    if (GetU32(bytes.data() + at + 8) != MaskCrc32c(Crc32c(bytes.data() + at, 8))) {
      return InvalidArgument(where + ": the length's CRC-32C does not match");
    }
    if (bytes.size() - at - 12 < length + 4) return InvalidArgument(where + ": truncated data");
    const char* data = bytes.data() + at + 12;
    if (GetU32(data + length) != MaskCrc32c(Crc32c(data, length))) {
      return InvalidArgument(where + ": the data's CRC-32C does not match");
    }
    records.emplace_back(data, length);
    at += 12 + length + 4;
  }
  return records;
}

}  // namespace ddp
