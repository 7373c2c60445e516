#include "runtime/tensor.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>

namespace ddp {
namespace {

Allocator* CpuAllocatorForIndex(int) { return GetCpuAllocator(); }
Allocator* MetaAllocatorForIndex(int index) {
  return index == 0 ? static_cast<Allocator*>(GetMetaAllocator()) : GetMetaHostAllocator();
}

// By DeviceType: CPU, CUDA (registered by the CUDA backend), meta.
struct AllocatorRegistry {
  std::mutex mu;
  Allocator* (*by_type[3])(int) = {&CpuAllocatorForIndex, nullptr, &MetaAllocatorForIndex};
  DeviceTensorOps ops[3];
};

AllocatorRegistry& Registry() {
  static AllocatorRegistry* registry = new AllocatorRegistry();
  return *registry;
}

template <typename T>
void FillTyped(void* data, int64_t n, T value) {
  T* p = static_cast<T*>(data);
  std::fill(p, p + n, value);
}

}  // namespace

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    CHECK_GE(d, 0) << "negative dimension in shape " << ShapeToString(shape);
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void RegisterAllocator(DeviceType type, Allocator* (*allocator_for_index)(int index)) {
  AllocatorRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.by_type[static_cast<int>(type)] = allocator_for_index;
}

void RegisterDeviceTensorOps(DeviceType type, DeviceTensorOps ops) {
  AllocatorRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.ops[static_cast<int>(type)] = ops;
}

namespace {

const DeviceTensorOps& OpsFor(DeviceType type, const char* what) {
  AllocatorRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  const DeviceTensorOps& ops = registry.ops[static_cast<int>(type)];
  CHECK(ops.copy != nullptr && ops.fill != nullptr) << what << ": this build has no backend for the device";
  return ops;
}

}  // namespace

Allocator* GetAllocator(const Device& device) {
  AllocatorRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto* factory = registry.by_type[static_cast<int>(device.type)];
  CHECK(factory != nullptr) << "no allocator for device " << device.ToString()
                            << ": this build has no backend for it";
  return factory(device.index);
}

Storage::Storage(Allocator* allocator, size_t nbytes)
    : allocator_(allocator), nbytes_(nbytes), data_(allocator->Allocate(nbytes)) {}

Storage::~Storage() { allocator_->Deallocate(data_, nbytes_); }

Tensor Tensor::Empty(const Shape& shape, DType dtype, Device device) {
  return EmptyFrom(GetAllocator(device), shape, dtype);
}

Tensor Tensor::Empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  CHECK(format == MemoryFormat::kContiguous || shape.size() == 4)
      << "a channels-last tensor is 4-D, not " << ShapeToString(shape);
  Tensor t = Empty(shape, dtype, device);
  t.format_ = format;
  return t;
}

namespace {
thread_local const ActivationScope* t_activation_scope = nullptr;
std::atomic<int64_t> g_activation_batch_size{0};
std::atomic<bool> g_bound_counted{false};
std::atomic<int64_t> g_past_bound{0};
}  // namespace

void SetActivationBoundCounted(bool counted) { g_bound_counted.store(counted); }
int64_t ActivationsPastBound() { return g_past_bound.load(); }
void ResetActivationsPastBound() { g_past_bound.store(0); }

ActivationScope::ActivationScope(const std::string& layer, const char* pass)
    : outer_(t_activation_scope), layer_(layer), pass_(pass) {
  t_activation_scope = this;
}

ActivationScope::~ActivationScope() { t_activation_scope = outer_; }

void SetActivationBatchSize(int64_t batch_size) { g_activation_batch_size.store(batch_size); }

void ActivationScopeName(std::string* layer, std::string* pass) {
  const ActivationScope* scope = t_activation_scope;
  *layer = scope != nullptr ? scope->layer_ : std::string();
  *pass = scope != nullptr ? scope->pass_ : "";
}

void CheckActivationSize(const Shape& shape, DType dtype) {
  const ActivationScope* scope = t_activation_scope;
  if (scope == nullptr || dtype == DType::kU8) return;
  const int64_t elements = NumElements(shape);
  if (elements <= kMaxActivationElements) return;
  if (g_bound_counted.load()) {
    g_past_bound.fetch_add(1);
    return;
  }
  std::string line = scope->layer_ + " " + scope->pass_ + ": a " + ShapeToString(shape) + " " + DTypeName(dtype) +
                     " activation (" + std::to_string(elements) +
                     " elements) is past the 2^31 - 1 elements that cuDNN and this runtime's kernels take";
  const int64_t batch = g_activation_batch_size.load();
  if (batch > 0) {
    // Activations grow with the batch: this one fits below this size (a
    // later layer's may need a smaller one still).
    const int64_t fits = static_cast<int64_t>(static_cast<long double>(kMaxActivationElements) * batch / elements);
    line += "; it fits at --batch-size " + std::to_string(fits) + " or less (from " + std::to_string(batch) + ")";
  }
  FatalError(line);
}

Tensor Tensor::EmptyFrom(Allocator* allocator, const Shape& shape, DType dtype) {
  CheckActivationSize(shape, dtype);
  const size_t nbytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  return Tensor(std::make_shared<Storage>(allocator, nbytes), 0, shape, dtype);
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = Empty(shape, dtype, device);
  t.Fill(0.0);
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  CHECK(i >= 0 && i < n) << "dim " << i << " of " << DebugString();
  return shape_[i];
}

Tensor Tensor::View(int64_t element_offset, const Shape& shape) const {
  CHECK(defined()) << "View of an undefined tensor";
  CHECK(!channels_last()) << "View of channels-last " << DebugString();
  CHECK_GE(element_offset, 0);
  CHECK_LE(element_offset + NumElements(shape), numel())
      << "View at " << element_offset << " of " << ShapeToString(shape) << " exceeds " << DebugString();
  return Tensor(storage_, byte_offset_ + static_cast<size_t>(element_offset) * DTypeSize(dtype_), shape, dtype_);
}

Tensor Tensor::View(int64_t element_offset, const Shape& shape, MemoryFormat format) const {
  Tensor view = View(element_offset, shape);
  CHECK(format == MemoryFormat::kContiguous || shape.size() == 4)
      << "a channels-last view needs a 4-D shape, not " << ShapeToString(shape);
  view.format_ = format;
  return view;
}

Tensor Tensor::Reshape(const Shape& shape) const {
  CHECK_EQ(NumElements(shape), numel()) << "Reshape of " << DebugString() << " to " << ShapeToString(shape);
  CHECK(!channels_last()) << "Reshape of channels-last " << DebugString();
  return Tensor(storage_, byte_offset_, shape, dtype_);
}

Tensor Tensor::ReinterpretAs(DType dtype, const Shape& shape) const {
  CHECK(defined()) << "ReinterpretAs of an undefined tensor";
  CHECK(!channels_last()) << "ReinterpretAs of channels-last " << DebugString();
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  CHECK_LE(bytes, nbytes()) << "ReinterpretAs " << DTypeName(dtype) << ShapeToString(shape) << " exceeds "
                            << DebugString();
  CHECK_EQ(byte_offset_ % DTypeSize(dtype), 0u) << "ReinterpretAs " << DTypeName(dtype) << " of a misaligned view";
  return Tensor(storage_, byte_offset_, shape, dtype);
}

Tensor Tensor::Clone() const {
  Tensor t = Empty(shape_, dtype_, device(), format_);
  t.CopyFrom(*this);
  return t;
}

Tensor Tensor::To(Device device) const {
  if (this->device() == device) return *this;
  Tensor t = Empty(shape_, dtype_, device, format_);
  t.CopyFrom(*this);
  return t;
}

void Tensor::CopyFrom(const Tensor& src) {
  CHECK_EQ(src.numel(), numel()) << "CopyFrom " << src.DebugString() << " into " << DebugString();
  CHECK(src.dtype() == dtype_ && src.format() == format_)
      << "CopyFrom " << src.DebugString() << " into " << DebugString();
  if (nbytes() == 0 || SameData(src)) return;
  if (device().is_meta()) return;  // nothing to hold
  if (src.device().is_meta()) {    // no values to read: the host copy is zeros
    Fill(0.0);
    return;
  }
  if (device().is_cpu() && src.device().is_cpu()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  OpsFor(DeviceType::kCUDA, "Tensor::CopyFrom").copy(src, *this);
}

void Tensor::Fill(double value) {
  if (device().is_meta()) return;
  if (!device().is_cpu()) {
    if (numel() > 0) OpsFor(device().type, "Tensor::Fill").fill(*this, value);
    return;
  }
  const int64_t n = numel();
  switch (dtype_) {
    case DType::kF32: FillTyped<float>(raw_data(), n, static_cast<float>(value)); break;
    case DType::kF64: FillTyped<double>(raw_data(), n, value); break;
    case DType::kF16: FillTyped<Half>(raw_data(), n, FloatToHalf(static_cast<float>(value))); break;
    case DType::kBF16: FillTyped<BFloat16>(raw_data(), n, FloatToBFloat16(static_cast<float>(value))); break;
    case DType::kI32: FillTyped<int32_t>(raw_data(), n, static_cast<int32_t>(value)); break;
    case DType::kI64: FillTyped<int64_t>(raw_data(), n, static_cast<int64_t>(value)); break;
    case DType::kU8: FillTyped<uint8_t>(raw_data(), n, static_cast<uint8_t>(value)); break;
  }
}

double Tensor::GetAsDouble(int64_t i) const {
  CHECK(device().is_cpu()) << "GetAsDouble of " << DebugString();
  CHECK(i >= 0 && i < numel()) << "element " << i << " of " << DebugString();
  const void* p = raw_data();
  switch (dtype_) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF64: return static_cast<const double*>(p)[i];
    case DType::kF16: return HalfToFloat(static_cast<const Half*>(p)[i]);
    case DType::kBF16: return BFloat16ToFloat(static_cast<const BFloat16*>(p)[i]);
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kU8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0.0;
}

std::string Tensor::DebugString() const {
  if (!defined()) return "undefined tensor";
  return std::string(DTypeName(dtype_)) + ShapeToString(shape_) + (channels_last() ? " channels-last " : " ") +
         device().ToString();
}

}  // namespace ddp
