#include "runtime/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/durable_files.h"

namespace ddp {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kMetadataKey[] = "__metadata__";

Status Malformed(const std::string& source, const std::string& what) {
  return DataLoss(source + ": malformed safetensors file: " + what);
}

uint64_t ReadLittleEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Reads a non-negative integer that fits in int64.
bool GetCount(const Json& j, uint64_t* out) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0)) return false;
  *out = j.get<uint64_t>();
  return *out <= static_cast<uint64_t>(INT64_MAX);
}

StatusOr<Entry> ParseEntry(const std::string& source, const std::string& name, const Json& j) {
  const std::string where = "tensor '" + name + "'";
  if (!j.is_object()) return Malformed(source, where + " is not a JSON object");
  Entry e;
  e.name = name;
  auto dtype_it = j.find("dtype");
  if (dtype_it == j.end() || !dtype_it->is_string()) return Malformed(source, where + " has no string 'dtype'");
  const auto dtype = DTypeFromSafetensorsName(dtype_it->get<std::string>());
  if (!dtype) return Malformed(source, where + " has unsupported dtype '" + dtype_it->get<std::string>() + "'");
  e.dtype = *dtype;

  auto shape_it = j.find("shape");
  if (shape_it == j.end() || !shape_it->is_array()) return Malformed(source, where + " has no 'shape' array");
  uint64_t numel = 1;
  for (const Json& d : *shape_it) {
    uint64_t dim = 0;
    if (!GetCount(d, &dim)) return Malformed(source, where + " has a shape entry that is not a non-negative integer");
    if (dim != 0 && numel > static_cast<uint64_t>(INT64_MAX) / dim) {
      return Malformed(source, where + " has a shape whose element count overflows");
    }
    numel *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }

  auto offsets_it = j.find("data_offsets");
  if (offsets_it == j.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !GetCount((*offsets_it)[0], &e.begin) || !GetCount((*offsets_it)[1], &e.end)) {
    return Malformed(source, where + " needs 'data_offsets' [begin, end] of non-negative integers");
  }
  if (e.begin > e.end) return Malformed(source, where + " has data_offsets with begin after end");
  const uint64_t size = DTypeSize(e.dtype);
  if (numel > static_cast<uint64_t>(INT64_MAX) / size || e.end - e.begin != numel * size) {
    return Malformed(source, where + " spans " + std::to_string(e.end - e.begin) + " bytes but " +
                                 DTypeName(e.dtype) + ShapeToString(e.shape) + " needs " +
                                 std::to_string(numel * size));
  }
  return e;
}

}  // namespace

const Tensor* SafetensorsContents::Find(const std::string& name) const {
  for (const NamedTensor& t : tensors) {
    if (t.name == name) return &t.tensor;
  }
  return nullptr;
}

StatusOr<SafetensorsContents> ParseSafetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8) {
    return Malformed(source, "file is " + std::to_string(bytes.size()) +
                                 " bytes, shorter than the 8-byte header length");
  }
  const uint64_t header_len = ReadLittleEndian64(bytes.data());
  if (header_len > bytes.size() - 8) {
    return Malformed(source, "header length " + std::to_string(header_len) + " runs past the end of the " +
                                 std::to_string(bytes.size()) + "-byte file (truncated?)");
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return Malformed(source, "header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  }
  Json header;
  try {
    header = Json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const Json::exception& e) {
    return Malformed(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return Malformed(source, "header is not a JSON object");

  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) return Malformed(source, "__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return Malformed(source, "__metadata__ value '" + m.key() + "' is not a string");
        contents.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(Entry entry, ParseEntry(source, it.key(), it.value()));
    entries.push_back(std::move(entry));
  }

  const uint64_t data_size = bytes.size() - 8 - header_len;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t previous_end = 0;
  std::string previous_name;
  for (const Entry& e : entries) {
    if (e.end > data_size) {
      return Malformed(source, "tensor '" + e.name + "' data_offsets end " + std::to_string(e.end) +
                                   " is past the " + std::to_string(data_size) + "-byte data section (truncated?)");
    }
    if (e.begin < previous_end) {
      return Malformed(source, "tensor '" + e.name + "' overlaps tensor '" + previous_name + "'");
    }
    previous_end = e.end;
    previous_name = e.name;
    Tensor t = Tensor::Empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), bytes.data() + 8 + header_len + e.begin, e.end - e.begin);
    contents.tensors.push_back({e.name, std::move(t)});
  }
  return contents;
}

StatusOr<SafetensorsContents> ReadSafetensors(const std::string& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return NotFound(path + ": cannot open: no such file");
    return bytes.status();
  }
  return ParseSafetensors(*bytes, path);
}

Status CheckFinite(const SafetensorsContents& contents, const std::string& source) {
  for (const NamedTensor& t : contents.tensors) {
    const Tensor& x = t.tensor;
    double (*value)(const Tensor&, int64_t) = nullptr;
    switch (x.dtype()) {
      case DType::kF32: value = [](const Tensor& y, int64_t i) -> double { return y.data<float>()[i]; }; break;
      case DType::kF64: value = [](const Tensor& y, int64_t i) -> double { return y.data<double>()[i]; }; break;
      case DType::kF16: value = [](const Tensor& y, int64_t i) -> double { return HalfToFloat(y.data<Half>()[i]); }; break;
      case DType::kBF16:
        value = [](const Tensor& y, int64_t i) -> double { return BFloat16ToFloat(y.data<BFloat16>()[i]); };
        break;
      default: continue;  // integers are always finite
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = value(x, i);
      if (std::isfinite(v)) continue;
      return InvalidArgument(source + ": tensor '" + t.name + "' holds " + (std::isnan(v) ? "NaN" : "an infinite value") +
                             " (element " + std::to_string(i) + ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> SerializeSafetensors(const std::vector<NamedTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = m;
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (t.name == kMetadataKey) return InvalidArgument("a tensor may not be named __metadata__");
    if (!names.insert(t.name).second) return InvalidArgument("duplicate tensor name '" + t.name + "'");
    if (!t.tensor.defined()) return InvalidArgument("tensor '" + t.name + "' is undefined");
    if (!t.tensor.device().is_cpu()) return InvalidArgument("tensor '" + t.name + "' is not on the host");
    Json entry = Json::object();
    entry["dtype"] = SafetensorsDTypeName(t.tensor.dtype());
    entry["shape"] = t.tensor.shape();
    entry["data_offsets"] = {offset, offset + t.tensor.nbytes()};
    header[t.name] = entry;
    offset += t.tensor.nbytes();
  }
  std::string json = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the
  // reference writer does.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += json;
  for (const NamedTensor& t : tensors) out.append(static_cast<const char*>(t.tensor.raw_data()), t.tensor.nbytes());
  return out;
}

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeSafetensors(tensors, metadata));
  // Write a temporary file, flush it to disk, then rename it over `path`: a
  // crash leaves either the old file or the complete new one.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FailedPrecondition(path + ": cannot write: " + std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return FailedPrecondition(path + ": write failed: " + reason);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return FailedPrecondition(path + ": flushing to disk failed: " + reason);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return FailedPrecondition(path + ": cannot move the written file into place: " + reason);
  }
  return Status::Ok();
}

}  // namespace ddp
