// Allocators hand out device memory and count what they hold, so a run can
// report its persistent and peak bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/device.h"

namespace ddp {

// What running out of memory does: one line (OutOfMemoryLine), then the
// fatal handler. Without a handler the line goes to stderr and the process
// exits with status 1; ddp_train's handler ends every rank.
void SetFatalErrorHandler(void (*handler)(const std::string& line));
[[noreturn]] void FatalError(const std::string& line);
// What an out-of-memory line adds: what the process was doing and what to
// try, e.g. "training resnet50 at --batch-size 256; try a smaller
// --batch-size".
void SetOutOfMemoryContext(const std::string& context);
// What SetOutOfMemoryContext set ("" before).
std::string OutOfMemoryContext();

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Never returns null: running out of memory is fatal (OutOfMemory), with
  // the size asked.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Deallocate(void* ptr, size_t bytes) = 0;

  int64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }
  int64_t peak_bytes_in_use() const { return peak_bytes_.load(std::memory_order_relaxed); }
  // Bytes held from the system: in use plus cached for reuse.
  virtual int64_t reserved_bytes() const { return bytes_in_use(); }
  void ResetPeak() { peak_bytes_.store(bytes_in_use(), std::memory_order_relaxed); }

  // --device-memory-limit: at most `bytes` in tensors at once (0: no cap).
  // An allocation past it fails as the device running out would, so a large
  // GPU stands in for a smaller card (a 24 GiB RTX 4090 on an H200). Only
  // tensor bytes count: on a real card the CUDA context and the allocator's
  // fragmentation come on top.
  void set_limit_bytes(int64_t bytes) { limit_bytes_.store(bytes, std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_bytes_.load(std::memory_order_relaxed); }

  // "out of memory on cpu asking for 1.0 GiB (1.5 GiB in tensors, 1.6 GiB
  // reserved, --device-memory-limit 2.0 GiB) training resnet50 at
  // --batch-size 64; try a smaller --batch-size".
  std::string OutOfMemoryLine(size_t bytes) const;

 protected:
  // Fatal when `bytes` more would pass the cap.
  void CheckLimit(size_t bytes) const;
  [[noreturn]] void OutOfMemory(size_t bytes) const;
  void RecordAllocation(size_t bytes);
  void RecordDeallocation(size_t bytes);

 private:
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int64_t> limit_bytes_{0};
};

// 64-byte aligned host memory (one AVX-512 vector, one cache line).
//
// Blocks of at least kCachedBlockBytes are cached when freed and reused for
// later requests of similar size: a training step allocates the same
// activations every step, and fresh pages from the kernel cost a page fault
// and a page clear each (a quarter of ResNet-50's step time without this).
// Sizes round up to an eighth of their power of two, bounding waste at 12.5%.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kCachedBlockBytes = size_t{1} << 20;
  CpuAllocator() = default;
  ~CpuAllocator() override;
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  // Returns cached blocks to the system.
  void ReleaseCache();
  // Bytes held in the cache, free for reuse.
  int64_t cached_bytes() const;
  int64_t reserved_bytes() const override { return bytes_in_use() + cached_bytes(); }
  // The block size a request of `bytes` gets.
  static size_t RoundedSize(size_t bytes);

 private:
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_blocks_;  // by block size
  int64_t cached_bytes_ = 0;
};

// The process-wide host allocator.
CpuAllocator* GetCpuAllocator();

// The meta device's: counts what tensors would hold (the bytes asked, as
// CpuAllocator counts them) and holds nothing. Every allocation gets the
// same non-null address, which nothing reads: a meta tensor's data is
// refused (Tensor::raw_data). A cap (set_limit_bytes) applies as on a
// real device.
//
// It also remembers where its peak was reached: the allocation that made
// it (its bytes) and the layer and pass it was made in (the innermost
// ActivationScope; "" outside every layer: the optimizer, the gradient
// buckets, the input), for the memory plan's "the peak is ..." line.
class MetaAllocator final : public Allocator {
 public:
  struct PeakSite {
    std::string layer, pass;  // "encoder.layer.23", "backward"
    int64_t bytes = 0;        // the allocation that reached the peak
  };
  explicit MetaAllocator(int index = 0) : index_(index) {}
  Device device() const override { return Device{DeviceType::kMeta, index_}; }
  void* Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  PeakSite peak_site() const;
  // ResetPeak and forget the site.
  void ResetPeakSite();

 private:
  const int index_;
  mutable std::mutex mu_;
  PeakSite site_;
};
MetaAllocator* GetMetaAllocator();
// Device::MetaHost()'s, apart from the planned device's.
MetaAllocator* GetMetaHostAllocator();

}  // namespace ddp
