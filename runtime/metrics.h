// The metrics file: JSON lines, one record per step, then {"summary": {...}}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/status.h"

namespace ddp {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Creates (truncates) `path`; the message names the flag and the path.
  Status Open(const std::string& path);
  // A run resumed after step `step` continues the file of the run it
  // resumes: the records of steps up to `step` stay, and those the resumed
  // run repeats go (an earlier attempt's later steps, its summary, a line
  // torn by a crash), so each step has one record and the summary is last.
  // Lines that are not step records stay as they are. The file is replaced
  // atomically; a missing one is created.
  Status OpenResumed(const std::string& path, int64_t step);
  bool is_open() const { return file_ != nullptr; }
  // Appends one line and flushes it, so a crash loses at most the line being
  // written. No-op when not open.
  Status Write(const nlohmann::ordered_json& record);

 private:
  Status OpenFile(const std::string& path, const char* mode);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace ddp
