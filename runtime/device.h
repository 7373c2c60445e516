// Where a tensor lives and where an op runs.
#pragma once

#include <string>

namespace ddp {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device Cpu() { return Device{DeviceType::kCPU, 0}; }
  static Device Cuda(int index) { return Device{DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string ToString() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace ddp
