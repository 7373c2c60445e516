// TensorBoard scalars (--tensorboard-dir): an event file named
// events.out.tfevents.<seconds>.<host> (TensorBoard reads only names
// holding "tfevents"), in TFRecord framing: each record is its length
// (uint64, little-endian), the masked CRC-32C of those 8 bytes, the data,
// and the masked CRC-32C of the data. The first record is an Event with
// file_version "brain.Event:2"; then an Event per step, with a Summary of
// scalar values. Each step's record is flushed, so TensorBoard follows a
// run live.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "runtime/status.h"

namespace ddp {

class TensorBoardWriter {
 public:
  TensorBoardWriter() = default;
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Creates `dir` (and its parents) and the event file in it; errors name
  // --tensorboard-dir and the path.
  Status Open(const std::string& dir);
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  // One Event at `step` holding the scalars (tag, value). No-op when not
  // open.
  Status AddScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

 private:
  Status WriteRecord(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The records of a TFRecord file, every length and data CRC checked; an
// error names the record and what failed.
StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path);

}  // namespace ddp
