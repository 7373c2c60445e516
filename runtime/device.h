// Where a tensor lives and where an op runs.
#pragma once

#include <string>

namespace ddp {

// kMeta (--device meta, PyTorch's meta tensors): tensors with shapes and
// allocator accounting but no memory, on which ops check their arguments
// and allocate their outputs but run no kernel (runtime/meta_device.h).
enum class DeviceType { kCPU, kCUDA, kMeta };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device Cpu() { return Device{DeviceType::kCPU, 0}; }
  static Device Cuda(int index) { return Device{DeviceType::kCUDA, index}; }
  static Device Meta() { return Device{DeviceType::kMeta, 0}; }
  // The host of a planned CUDA rank: what such a rank keeps in host memory
  // while it starts (a whole model ZeRO takes its shards from), counted
  // apart from the planned device's memory.
  static Device MetaHost() { return Device{DeviceType::kMeta, 1}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool is_meta() const { return type == DeviceType::kMeta; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string ToString() const {
    return is_cpu() ? "cpu" : is_meta() ? (index == 0 ? "meta" : "meta host") : "cuda:" + std::to_string(index);
  }
};

}  // namespace ddp
