// Allocators hand out device memory and count what they hold, so a run can
// report its persistent and peak bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/device.h"

namespace ddp {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Never returns null: running out of memory is fatal, with the size asked.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Deallocate(void* ptr, size_t bytes) = 0;

  int64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }
  int64_t peak_bytes_in_use() const { return peak_bytes_.load(std::memory_order_relaxed); }
  void ResetPeak() { peak_bytes_.store(bytes_in_use(), std::memory_order_relaxed); }

 protected:
  void RecordAllocation(size_t bytes);
  void RecordDeallocation(size_t bytes);

 private:
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_bytes_{0};
};

// 64-byte aligned host memory (one AVX-512 vector, one cache line).
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
};

// The process-wide host allocator.
CpuAllocator* GetCpuAllocator();

}  // namespace ddp
