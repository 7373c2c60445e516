// Safetensors files: an 8-byte little-endian header length, a JSON header
// mapping each tensor name to {dtype, shape, data_offsets}, then the raw
// little-endian data. This is how weights move in and out (PyTorch names).
//
// Reading validates everything a corrupt or hostile file could get wrong and
// answers with a Status naming the file and the fault; it never crashes.
// Writing goes to a temporary file renamed into place, so an interrupted
// write never leaves a truncated file under the final name.
#pragma once

#include <map>
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
StatusOr<std::string> SerializeSafetensors(const std::vector<NamedTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

}  // namespace ddp
