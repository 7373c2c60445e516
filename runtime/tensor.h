// Tensor: a typed, shaped view of shared device memory.
//
// Tensors are contiguous (row-major) views at an offset into a Storage. Views
// share storage, which is how parameters and gradients become named views into
// flat buffers. Sizes are 64-bit throughout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace ddp {

using Shape = std::vector<int64_t>;

// How a 4-D tensor's elements lie in memory. Shapes are always logical
// [N, C, H, W]; channels-last stores them as [N, H, W, C] (PyTorch's
// torch.channels_last), which convolutions on oneDNN's NHWC kernels and
// cuDNN's tensor cores read without reordering.
enum class MemoryFormat : uint8_t { kContiguous, kChannelsLast };

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

// Installs the allocator used for tensors on devices of `type` (the CUDA
// backend registers itself; CPU is built in).
void RegisterAllocator(DeviceType type, Allocator* (*allocator_for_index)(int index));
Allocator* GetAllocator(const Device& device);

// Activations (the tensors layers make while they run) hold at most
// kMaxActivationElements: cuDNN's descriptors and this runtime's GPU
// kernels count elements in 32 bits, and CPU ranks keep the same bound so a
// job moves between devices unchanged. Inside an ActivationScope
// (Layer::Forward and Backward open one, naming the layer) a larger typed
// tensor is refused before any kernel sees it: one line through FatalError,
// naming the layer, the shape, and the --batch-size under which that tensor
// would fit (SetActivationBatchSize gives the run's). Raw byte buffers
// (scratch, workspaces) are not activations.
constexpr int64_t kMaxActivationElements = 2147483647;  // 2^31 - 1
class ActivationScope {
 public:
  ActivationScope(const std::string& layer, const char* pass);
  ~ActivationScope();
  ActivationScope(const ActivationScope&) = delete;
  ActivationScope& operator=(const ActivationScope&) = delete;

 private:
  const ActivationScope* outer_;
  const std::string& layer_;
  const char* pass_;
  friend void CheckActivationSize(const Shape& shape, DType dtype);
  friend void ActivationScopeName(std::string* layer, std::string* pass);
};
void SetActivationBatchSize(int64_t batch_size);
// The innermost ActivationScope of this thread: its layer and pass, or ""
// and "" outside every scope.
void ActivationScopeName(std::string* layer, std::string* pass);
// Fatal (the line above) when `shape` is past the bound inside a scope.
void CheckActivationSize(const Shape& shape, DType dtype);
// Planning (launch/memory_planner.h): with `counted`, an activation past
// the bound is counted instead of fatal, so a plan tells a batch that
// passes it from one that does not fit; ActivationsPastBound() counts them
// since ResetActivationsPastBound().
void SetActivationBoundCounted(bool counted);
int64_t ActivationsPastBound();
void ResetActivationsPastBound();

class Tensor;
// How tensors on a non-host device are copied and filled; the CUDA backend
// registers these. Both run on the device's current stream; a copy into
// host memory returns once the host can read it.
struct DeviceTensorOps {
  void (*copy)(const Tensor& src, Tensor& dst) = nullptr;
  void (*fill)(Tensor& t, double value) = nullptr;
};
void RegisterDeviceTensorOps(DeviceType type, DeviceTensorOps ops);

// One allocation; freed when the last tensor viewing it goes away.
class Storage {
 public:
  Storage(Allocator* allocator, size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return allocator_->device(); }

 private:
  Allocator* allocator_;
  size_t nbytes_;
  void* data_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds no storage

  // Uninitialized memory.
  static Tensor Empty(const Shape& shape, DType dtype, Device device = Device::Cpu());
  // Uninitialized memory in `format` (channels-last needs a 4-D shape).
  static Tensor Empty(const Shape& shape, DType dtype, Device device, MemoryFormat format);
  static Tensor Zeros(const Shape& shape, DType dtype, Device device = Device::Cpu());
  // Uninitialized memory of `t`'s shape, dtype, device and memory format.
  static Tensor EmptyLike(const Tensor& t) { return Empty(t.shape(), t.dtype(), t.device(), t.format()); }
  // Uninitialized memory from a given allocator (pinned host memory, say).
  static Tensor EmptyFrom(Allocator* allocator, const Shape& shape, DType dtype);
  // A host tensor holding `values`, whose count must match `shape`.
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // Size of dimension `i`; negative `i` counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  DType dtype() const { return dtype_; }
  MemoryFormat format() const { return format_; }
  bool channels_last() const { return format_ == MemoryFormat::kChannelsLast; }
  Device device() const { return storage_ ? storage_->device() : Device::Cpu(); }
  size_t byte_offset() const { return byte_offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // The first element's address. A meta tensor has none: asking is a bug
  // (an op that runs a kernel on the meta device), fatal naming the tensor.
  void* raw_data() const {
    CHECK(!storage_->device().is_meta()) << "the data of " << DebugString() << ": meta tensors hold none";
    return static_cast<char*>(storage_->data()) + byte_offset_;
  }
  // Whether both view the same storage from the same byte (meta tensors
  // too).
  bool SameData(const Tensor& o) const { return storage_ == o.storage_ && byte_offset_ == o.byte_offset_; }
  template <typename T>
  T* data() const {
    CHECK(defined()) << "data() of an undefined tensor";
    CHECK(dtype_ == DTypeOf<T>::value) << "tensor is " << DTypeName(dtype_) << ", accessed as "
                                       << DTypeName(DTypeOf<T>::value);
    return static_cast<T*>(raw_data());
  }

  // A view of `numel(shape)` elements starting `element_offset` elements into
  // this tensor, sharing its storage. View, Reshape and ReinterpretAs take
  // contiguous tensors and give contiguous ones.
  Tensor View(int64_t element_offset, const Shape& shape) const;
  // The same, in `format` (a channels-last view of a flat buffer's region:
  // a weight copy laid out [K, R, S, C], say).
  Tensor View(int64_t element_offset, const Shape& shape, MemoryFormat format) const;
  // The same elements under another shape of equal element count.
  Tensor Reshape(const Shape& shape) const;
  // The same bytes read as `dtype` elements of `shape`, from the start of
  // this view (scratch buffers become typed tensors this way).
  Tensor ReinterpretAs(DType dtype, const Shape& shape) const;
  // A new tensor with its own storage holding a copy of this one.
  Tensor Clone() const;
  // This tensor on `device`: itself when already there, else a copy (made on
  // the device's current stream; a copy to the host is ready on return).
  Tensor To(Device device) const;

  // Copies elements of equal count, dtype and memory format from `src`, on the host or
  // between host and device in either direction (device copies run on the
  // device's current stream; those involving host memory finish before
  // return, device-to-device ones are ordered on the stream).
  void CopyFrom(const Tensor& src);
  // Sets every element to `value`, converted to the dtype (on a device: on
  // its current stream).
  void Fill(double value);
  // Element i as a double, converting from any dtype (host tensors; for tests
  // and messages). i counts in memory order (NHWC for channels-last).
  double GetAsDouble(int64_t i) const;

  // "f32[2, 3] cpu"
  std::string DebugString() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, size_t byte_offset, Shape shape, DType dtype,
         MemoryFormat format = MemoryFormat::kContiguous)
      : storage_(std::move(storage)), byte_offset_(byte_offset), shape_(std::move(shape)), dtype_(dtype),
        format_(format) {}

  std::shared_ptr<Storage> storage_;
  size_t byte_offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
  MemoryFormat format_ = MemoryFormat::kContiguous;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, const Shape& shape) {
  CHECK_EQ(static_cast<int64_t>(values.size()), NumElements(shape))
      << "FromVector: " << values.size() << " values for shape " << ShapeToString(shape);
  Tensor t = Empty(shape, DTypeOf<T>::value);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

}  // namespace ddp
