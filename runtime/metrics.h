// The metrics file: JSON lines, one record per step, then {"summary": {...}}.
#pragma once

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

  // Creates (truncates) `path`, or with `append` adds to it (a resumed
  // run); the message names the flag and the path.
  Status Open(const std::string& path, bool append = false);
  bool is_open() const { return file_ != nullptr; }
  // Appends one line and flushes it, so a crash loses at most the line being
  // written. No-op when not open.
  Status Write(const nlohmann::ordered_json& record);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace ddp
