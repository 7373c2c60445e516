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

size_t CpuAllocator::RoundedSize(size_t bytes) {
  if (bytes < kCachedBlockBytes) return ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  // Round up to a multiple of an eighth of the largest power of two <= bytes.
  size_t power = kCachedBlockBytes;
  while (power * 2 <= bytes) power *= 2;
  const size_t step = power / 8;
  return ((bytes + step - 1) / step) * step;
}

CpuAllocator::~CpuAllocator() { ReleaseCache(); }

void* CpuAllocator::Allocate(size_t bytes) {
  const size_t size = RoundedSize(bytes == 0 ? 1 : bytes);
  void* ptr = nullptr;
  if (size >= kCachedBlockBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end()) {
      ptr = it->second;
      free_blocks_.erase(it);
      cached_bytes_ -= static_cast<int64_t>(size);
    }
  }
  if (ptr == nullptr) {
    ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr && cached_bytes() > 0) {  // give the cache back and try once more
      ReleaseCache();
      ptr = std::aligned_alloc(kAlignment, size);
    }
  }
  CHECK(ptr != nullptr) << "out of host memory allocating " << bytes << " bytes (" << bytes_in_use()
                        << " bytes already in use)";
  RecordAllocation(bytes);
  return ptr;
}

void CpuAllocator::Deallocate(void* ptr, size_t bytes) {
  const size_t size = RoundedSize(bytes == 0 ? 1 : bytes);
  RecordDeallocation(bytes);
  if (size >= kCachedBlockBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_blocks_.emplace(size, ptr);
    cached_bytes_ += static_cast<int64_t>(size);
    return;
  }
  std::free(ptr);
}

void CpuAllocator::ReleaseCache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, ptr] : free_blocks_) std::free(ptr);
  free_blocks_.clear();
  cached_bytes_ = 0;
}

int64_t CpuAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

CpuAllocator* GetCpuAllocator() {
  static CpuAllocator* allocator = new CpuAllocator();
  return allocator;
}

}  // namespace ddp
