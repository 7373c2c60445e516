#include "runtime/allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <glog/logging.h>

#include "runtime/byte_size.h"
#include "runtime/tensor.h"

namespace ddp {
namespace {

std::mutex g_fatal_mu;
void (*g_fatal_handler)(const std::string&) = nullptr;
std::string g_oom_context;

}  // namespace

void SetFatalErrorHandler(void (*handler)(const std::string& line)) {
  std::lock_guard<std::mutex> lock(g_fatal_mu);
  g_fatal_handler = handler;
}

void SetOutOfMemoryContext(const std::string& context) {
  std::lock_guard<std::mutex> lock(g_fatal_mu);
  g_oom_context = context;
}

std::string OutOfMemoryContext() {
  std::lock_guard<std::mutex> lock(g_fatal_mu);
  return g_oom_context;
}

void FatalError(const std::string& line) {
  void (*handler)(const std::string&) = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_fatal_mu);
    handler = g_fatal_handler;
  }
  if (handler != nullptr) handler(line);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(nullptr);
  std::_Exit(1);  // no static destructors: other threads (CUDA, MPI) may be in no state to run them
}

std::string Allocator::OutOfMemoryLine(size_t bytes) const {
  const std::string context = OutOfMemoryContext();
  const Device d = device();
  // A request past int64 (a size from the flags) shows as the largest.
  const int64_t asked = static_cast<int64_t>(std::min<size_t>(bytes, std::numeric_limits<int64_t>::max()));
  std::string line = std::string(d.is_cuda() ? "CUDA " : "") + "out of memory on " + d.ToString() + " asking for " +
                     FormatBytes(asked) + " (" + FormatBytes(bytes_in_use()) + " in tensors, " +
                     FormatBytes(reserved_bytes()) + " reserved";
  if (limit_bytes() > 0) line += ", --device-memory-limit " + FormatBytes(limit_bytes());
  line += ")";
  return context.empty() ? line : line + " " + context;
}

void Allocator::CheckLimit(size_t bytes) const {
  const int64_t limit = limit_bytes();
  if (limit > 0 && bytes_in_use() + static_cast<int64_t>(bytes) > limit) OutOfMemory(bytes);
}

void Allocator::OutOfMemory(size_t bytes) const { FatalError(OutOfMemoryLine(bytes)); }

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
  while (power <= bytes / 2) power *= 2;  // no overflow, however large
  const size_t step = power / 8;
  return ((bytes + step - 1) / step) * step;
}

CpuAllocator::~CpuAllocator() { ReleaseCache(); }

void* CpuAllocator::Allocate(size_t bytes) {
  // Past any machine's memory, and past what the rounding below can count.
  if (bytes > (std::numeric_limits<size_t>::max() >> 2)) OutOfMemory(bytes);
  CheckLimit(bytes);
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
  if (ptr == nullptr) OutOfMemory(bytes);
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

void* MetaAllocator::Allocate(size_t bytes) {
  CheckLimit(bytes);
  const int64_t before = peak_bytes_in_use();
  RecordAllocation(bytes);
  if (peak_bytes_in_use() > before) {
    std::lock_guard<std::mutex> lock(mu_);
    site_.bytes = static_cast<int64_t>(bytes);
    ActivationScopeName(&site_.layer, &site_.pass);
  }
  static char nothing;
  return &nothing;
}

MetaAllocator::PeakSite MetaAllocator::peak_site() const {
  std::lock_guard<std::mutex> lock(mu_);
  return site_;
}

void MetaAllocator::ResetPeakSite() {
  ResetPeak();
  std::lock_guard<std::mutex> lock(mu_);
  site_ = PeakSite();
}

void MetaAllocator::Deallocate(void*, size_t bytes) { RecordDeallocation(bytes); }

MetaAllocator* GetMetaAllocator() {
  static MetaAllocator* allocator = new MetaAllocator();
  return allocator;
}

MetaAllocator* GetMetaHostAllocator() {
  static MetaAllocator* allocator = new MetaAllocator(1);
  return allocator;
}

}  // namespace ddp
