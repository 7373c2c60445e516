#include "runtime/metrics.h"

#include <cerrno>
#include <cstring>

namespace ddp {

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status MetricsWriter::Open(const std::string& path, bool append) {
  path_ = path;
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (file_ == nullptr) return FailedPrecondition("--metrics-file " + path + ": cannot open: " + std::strerror(errno));
  return Status::Ok();
}

Status MetricsWriter::Write(const nlohmann::ordered_json& record) {
  if (file_ == nullptr) return Status::Ok();
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return FailedPrecondition("--metrics-file " + path_ + ": write failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace ddp
