#include "runtime/metrics.h"

#include <cerrno>
#include <cstring>

#include "runtime/durable_files.h"

namespace ddp {

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status MetricsWriter::Open(const std::string& path) { return OpenFile(path, "w"); }

Status MetricsWriter::OpenFile(const std::string& path, const char* mode) {
  path_ = path;
  file_ = std::fopen(path.c_str(), mode);
  if (file_ == nullptr) return FailedPrecondition("--metrics-file " + path + ": cannot open: " + std::strerror(errno));
  return Status::Ok();
}

Status MetricsWriter::OpenResumed(const std::string& path, int64_t step) {
  if (PathExists(path)) {
    StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return FailedPrecondition("--metrics-file " + path + ": " + text.status().message());
    std::string kept;
    size_t begin = 0;
    while (begin < text->size()) {
      const size_t newline = text->find('\n', begin);
      if (newline == std::string::npos) break;  // torn by a crash mid-write
      const std::string line = text->substr(begin, newline - begin);
      begin = newline + 1;
      const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_object()) {
        if (record.contains("summary")) continue;
        const auto at = record.find("step");
        if (at != record.end() && at->is_number_integer() && at->get<int64_t>() > step) continue;
      }
      kept += line + "\n";
    }
    const Status replaced = ReplaceFileAtomically(path, kept);
    if (!replaced.ok()) return FailedPrecondition("--metrics-file " + path + ": " + replaced.message());
  }
  return OpenFile(path, "a");
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
