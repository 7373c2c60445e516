// Safetensors files: an 8-byte little-endian header length, a JSON header
// mapping each tensor name to {dtype, shape, data_offsets}, then the raw
// little-endian data. This is how weights move in and out (PyTorch names).
//
// Reading validates everything a corrupt or hostile file could get wrong and
// answers with a Status naming the file and the fault; it never crashes.
// Writing goes to a temporary file renamed into place, so an interrupted
// write never leaves a truncated file under the final name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct SafetensorsContents {
  std::vector<NamedTensor> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;

  // The tensor called `name`, or null.
  const Tensor* Find(const std::string& name) const;
};

// The most header bytes accepted (as the reference implementation).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100 * 1000 * 1000;

StatusOr<SafetensorsContents> ReadSafetensors(const std::string& path);
// Every floating-point tensor's values finite; else an error naming
// `source`, the tensor and its first NaN or infinite element.
Status CheckFinite(const SafetensorsContents& contents, const std::string& source);
// Parses an in-memory file; `source` names it in error messages.
StatusOr<SafetensorsContents> ParseSafetensors(const std::string& bytes, const std::string& source);

// Host tensors only. Names must be unique and not "__metadata__".
Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// One tensor of a file written piece by piece.
struct TensorLayout {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

// A safetensors file written piece by piece, for tensors that are never
// whole in memory (ZeRO's sharded weights, gathered a bucket at a time):
// the layout is fixed up front from each tensor's name, dtype and shape
// (their order in the file), the data is then written at any offsets in
// any order, and Commit flushes the file and renames it into place once
// every byte was written. Until then it is a temporary file beside `path`,
// removed by a writer that goes without committing. Errors name `path`.
class SafetensorsFileWriter {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFileWriter>> Create(
      const std::string& path, const std::vector<TensorLayout>& tensors,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsFileWriter();
  SafetensorsFileWriter(const SafetensorsFileWriter&) = delete;
  SafetensorsFileWriter& operator=(const SafetensorsFileWriter&) = delete;

  // `bytes` of host memory into tensor `index`, from byte `offset` of it
  // (pieces must not overlap).
  Status Write(size_t index, uint64_t offset, const void* data, uint64_t bytes);
  Status Commit();

 private:
  SafetensorsFileWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::vector<std::string> names_;
  std::vector<uint64_t> offsets_, sizes_, written_;
};
StatusOr<std::string> SerializeSafetensors(const std::vector<NamedTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

}  // namespace ddp
