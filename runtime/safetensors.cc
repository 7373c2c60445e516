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

namespace {

// The 8-byte length and the JSON header, padded so the data starts 8-byte
// aligned (as the reference writer does); `offsets` gets each tensor's
// start in the data.
StatusOr<std::string> Header(const std::vector<TensorLayout>& tensors, const std::map<std::string, std::string>& metadata,
                             std::vector<uint64_t>* offsets) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = m;
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorLayout& t : tensors) {
    if (t.name == kMetadataKey) return InvalidArgument("a tensor may not be named __metadata__");
    if (!names.insert(t.name).second) return InvalidArgument("duplicate tensor name '" + t.name + "'");
    const uint64_t bytes = static_cast<uint64_t>(NumElements(t.shape)) * DTypeSize(t.dtype);
    Json entry = Json::object();
    entry["dtype"] = SafetensorsDTypeName(t.dtype);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + bytes};
    header[t.name] = entry;
    offsets->push_back(offset);
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  const uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + json;
}

StatusOr<std::vector<TensorLayout>> HostLayouts(const std::vector<NamedTensor>& tensors) {
  std::vector<TensorLayout> layouts;
  for (const NamedTensor& t : tensors) {
    if (!t.tensor.defined()) return InvalidArgument("tensor '" + t.name + "' is undefined");
    if (!t.tensor.device().is_cpu()) return InvalidArgument("tensor '" + t.name + "' is not on the host");
    layouts.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  }
  return layouts;
}

// pwrite of all `bytes` at `at`.
bool WriteAt(int fd, const void* data, uint64_t bytes, uint64_t at) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return false;
    p += n;
    at += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

StatusOr<std::string> SerializeSafetensors(const std::vector<NamedTensor>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(const std::vector<TensorLayout> layouts, HostLayouts(tensors));
  std::vector<uint64_t> offsets;
  ASSIGN_OR_RETURN(std::string out, Header(layouts, metadata, &offsets));
  for (const NamedTensor& t : tensors) out.append(static_cast<const char*>(t.tensor.raw_data()), t.tensor.nbytes());
  return out;
}

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  const StatusOr<std::vector<TensorLayout>> layouts = HostLayouts(tensors);
  if (!layouts.ok()) return Status(layouts.status().code(), path + ": " + layouts.status().message());
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFileWriter> writer,
                   SafetensorsFileWriter::Create(path, *layouts, metadata));
  for (size_t i = 0; i < tensors.size(); ++i) {
    RETURN_IF_ERROR(writer->Write(i, 0, tensors[i].tensor.raw_data(), tensors[i].tensor.nbytes()));
  }
  return writer->Commit();
}

StatusOr<std::unique_ptr<SafetensorsFileWriter>> SafetensorsFileWriter::Create(
    const std::string& path, const std::vector<TensorLayout>& tensors, const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsFileWriter> w(new SafetensorsFileWriter());
  const StatusOr<std::string> header = Header(tensors, metadata, &w->offsets_);
  if (!header.ok()) return Status(header.status().code(), path + ": " + header.status().message());
  for (const TensorLayout& t : tensors) {
    w->names_.push_back(t.name);
    w->sizes_.push_back(static_cast<uint64_t>(NumElements(t.shape)) * DTypeSize(t.dtype));
  }
  w->written_.assign(tensors.size(), 0);
  w->path_ = path;
  // A crash leaves either the old file or the complete new one.
  w->tmp_ = path + ".tmp." + std::to_string(::getpid());
  w->fd_ = ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return FailedPrecondition(path + ": cannot write: " + std::strerror(errno));
  w->data_start_ = header->size();
  if (!WriteAt(w->fd_, header->data(), header->size(), 0)) {
    return FailedPrecondition(path + ": write failed: " + std::strerror(errno));
  }
  return w;
}

SafetensorsFileWriter::~SafetensorsFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status SafetensorsFileWriter::Write(size_t index, uint64_t offset, const void* data, uint64_t bytes) {
  CHECK(index < sizes_.size() && offset + bytes <= sizes_[index] && fd_ >= 0)
      << path_ << ": a write of " << bytes << " bytes at " << offset << " into tensor " << index;
  if (!WriteAt(fd_, data, bytes, data_start_ + offsets_[index] + offset)) {
    return FailedPrecondition(path_ + ": write failed: " + std::strerror(errno));
  }
  written_[index] += bytes;
  return Status::Ok();
}

Status SafetensorsFileWriter::Commit() {
  for (size_t i = 0; i < sizes_.size(); ++i) {
    CHECK_EQ(written_[i], sizes_[i]) << path_ << ": tensor '" << names_[i] << "' written in part";
  }
  const bool synced = ::fsync(fd_) == 0;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) return FailedPrecondition(path_ + ": flushing to disk failed: " + std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return FailedPrecondition(path_ + ": cannot move the written file into place: " + std::strerror(errno));
  }
  tmp_.clear();
  return Status::Ok();
}

}  // namespace ddp
