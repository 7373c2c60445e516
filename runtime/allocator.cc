#include "runtime/allocator.h"

#include <cstdlib>

#include <glog/logging.h>

namespace ddp {

void Allocator::RecordAllocation(size_t bytes) {
  const int64_t now = bytes_in_use_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                      static_cast<int64_t>(bytes);
  int64_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void Allocator::RecordDeallocation(size_t bytes) {
  bytes_in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void* CpuAllocator::Allocate(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment; zero-size
  // tensors still get a valid, distinct pointer.
  const size_t rounded = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  CHECK(ptr != nullptr) << "out of host memory allocating " << bytes << " bytes ("
                        << bytes_in_use() << " bytes already in use)";
  RecordAllocation(bytes);
  return ptr;
}

void CpuAllocator::Deallocate(void* ptr, size_t bytes) {
  std::free(ptr);
  RecordDeallocation(bytes);
}

CpuAllocator* GetCpuAllocator() {
  static CpuAllocator* allocator = new CpuAllocator();
  return allocator;
}

}  // namespace ddp
