// The CUDA side of runtime/cuda/cuda_device.h: compiled only where nvcc
// exists (cuda_device.cc holds the stand-ins of a CPU-only build).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_device.h"

namespace ddp::cuda {
namespace {

constexpr int kMaxDevices = 64;

void* g_current_stream[kMaxDevices] = {};
std::atomic<std::string (*)(double)> g_watchdog{nullptr};
[[noreturn]] void Fatal(const std::string& line) { FatalError(line); }

std::string MiB(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// Restores the calling thread's device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    Check(cudaGetDevice(&previous_), "cudaGetDevice", __FILE__, __LINE__);
    if (previous_ != index) Check(cudaSetDevice(index), "cudaSetDevice", __FILE__, __LINE__);
    changed_ = previous_ != index;
  }
  ~DeviceGuard() {
    if (changed_) Check(cudaSetDevice(previous_), "cudaSetDevice", __FILE__, __LINE__);
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// Device memory for tensors, in the order of the device's current stream.
//
// Normally from the device's default cudaMallocAsync pool, allocated and
// freed on the current stream, with an unlimited release threshold: freed
// memory stays in the pool and comes back, in stream order and without
// synchronizing, for the next step's activations. That is the stream-ordered
// caching allocator.
//
// Where pools are not supported (cudaDevAttrMemoryPoolsSupported is 0, or
// the first pooled allocation fails, as under sandboxes that lack the
// virtual memory calls), or DDP_CUDA_ALLOCATOR=caching asks for it: blocks
// from cudaMalloc, kept in size classes when freed and handed out again at
// once. With one compute stream that is just as stream-ordered: whatever
// reuses a block is enqueued after everything that used it. On running out,
// the cache is given back (cudaFree synchronizes: the out-of-memory path
// only) and the allocation tried once more.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {
    DeviceGuard guard(index_);
    const char* mode = std::getenv("DDP_CUDA_ALLOCATOR");
    int supported = 0;
    Check(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, index_), "cudaDeviceGetAttribute",
          __FILE__, __LINE__);
    use_pool_ = supported != 0 && !(mode != nullptr && std::string(mode) == "caching");
    if (use_pool_) {
      use_pool_ = cudaDeviceGetDefaultMemPool(&pool_, index_) == cudaSuccess;
      uint64_t unlimited = UINT64_MAX;
      if (use_pool_) use_pool_ = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &unlimited) == cudaSuccess;
      void* probe = nullptr;  // a pool that cannot allocate is no pool
      if (use_pool_) use_pool_ = cudaMallocAsync(&probe, 256, Stream()) == cudaSuccess;
      if (use_pool_) use_pool_ = cudaFreeAsync(probe, Stream()) == cudaSuccess;
      cudaGetLastError();  // a failed probe leaves no sticky error behind
    }
  }
  Device device() const override { return Device::Cuda(index_); }
  bool pooled() const { return use_pool_; }

  void* Allocate(size_t bytes) override {
    CheckLimit(bytes);
    DeviceGuard guard(index_);
    void* ptr = use_pool_ ? AllocateFromPool(bytes) : AllocateCached(bytes);
    RecordAllocation(bytes);
    return ptr;
  }

  void Deallocate(void* ptr, size_t bytes) override {
    DeviceGuard guard(index_);
    if (use_pool_) {
      FreeToPool(ptr);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      cached_.emplace(CpuAllocator::RoundedSize(bytes == 0 ? 1 : bytes), ptr);
    }
    RecordDeallocation(bytes);
  }

  int64_t reserved_bytes() const override {
    if (!use_pool_) {
      std::lock_guard<std::mutex> lock(mu_);
      return reserved_;
    }
    uint64_t reserved = 0;
    Check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved), "cudaMemPoolGetAttribute",
          __FILE__, __LINE__);
    return static_cast<int64_t>(reserved);
  }

 private:
  cudaStream_t Stream() const { return static_cast<cudaStream_t>(g_current_stream[index_]); }

  void* AllocateFromPool(size_t bytes) {
    void* ptr = nullptr;
    const cudaError_t error = cudaMallocAsync(&ptr, bytes == 0 ? 1 : bytes, Stream());
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it and report
      OutOfMemory(bytes);
    }
    Check(error, "cudaMallocAsync", __FILE__, __LINE__);
    if (const unsigned long long capture = CaptureId(); capture != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      graph_memory_[ptr] = capture;
    }
    return ptr;
  }

  // While the stream is captured into a CUDA graph, cudaMallocAsync and
  // cudaFreeAsync become the graph's own allocation and free nodes. A block
  // the capture allocated and frees is freed inside the graph, at each
  // replay. Any other block freed during a capture (memory from before it, a
  // scratch buffer outgrown) may still be read by the nodes captured before
  // the free: it is kept, unfreed, until ReleaseHeldForCapture (after the
  // graph is destroyed). Outside a capture, graph memory that outlived its
  // graph's capture is freed as any block.
  void FreeToPool(void* ptr) {
    const unsigned long long capture = CaptureId();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = graph_memory_.find(ptr);
      const unsigned long long owner = it == graph_memory_.end() ? 0 : it->second;
      if (capture != 0 && owner != capture) {
        held_for_capture_.push_back(ptr);
        return;
      }
      if (it != graph_memory_.end()) graph_memory_.erase(it);
    }
    Check(cudaFreeAsync(ptr, Stream()), "cudaFreeAsync", __FILE__, __LINE__);
  }

 public:
  void ReleaseHeldForCapture() {
    DeviceGuard guard(index_);
    std::vector<void*> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_for_capture_);
      for (void* ptr : held) graph_memory_.erase(ptr);
    }
    for (void* ptr : held) Check(cudaFreeAsync(ptr, Stream()), "cudaFreeAsync", __FILE__, __LINE__);
  }

  // Gives the pool's and the graphs' unused memory back to the device, once
  // the current stream is idle (a graph's activations come from memory of
  // its own, which the eager steps' cached blocks would otherwise crowd).
  void TrimPools() {
    DeviceGuard guard(index_);
    Synchronize(Stream());
    if (use_pool_) Check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo", __FILE__, __LINE__);
    Check(cudaDeviceGraphMemTrim(index_), "cudaDeviceGraphMemTrim", __FILE__, __LINE__);
  }

 private:
  // The capture sequence the current stream is in, 0 when none.
  unsigned long long CaptureId() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    Check(cudaStreamGetCaptureInfo(Stream(), &status, &id), "cudaStreamGetCaptureInfo", __FILE__, __LINE__);
    return status == cudaStreamCaptureStatusNone ? 0 : id;
  }

  void* AllocateCached(size_t bytes) {
    const size_t size = CpuAllocator::RoundedSize(bytes == 0 ? 1 : bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cached_.find(size);
      if (it != cached_.end()) {
        void* ptr = it->second;
        cached_.erase(it);
        return ptr;
      }
    }
    void* ptr = nullptr;
    cudaError_t error = cudaMalloc(&ptr, size);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ReleaseCache();
      error = cudaMalloc(&ptr, size);
      if (error == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        OutOfMemory(bytes);
      }
    }
    Check(error, "cudaMalloc", __FILE__, __LINE__);
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ += static_cast<int64_t>(size);
    return ptr;
  }

  void ReleaseCache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, ptr] : cached_) {
      Check(cudaFree(ptr), "cudaFree", __FILE__, __LINE__);
      reserved_ -= static_cast<int64_t>(size);
    }
    cached_.clear();
  }

  int index_;
  bool use_pool_ = false;
  cudaMemPool_t pool_ = nullptr;
  mutable std::mutex mu_;                 // the cudaMalloc cache; the pool's graph bookkeeping
  std::multimap<size_t, void*> cached_;  // by block size
  std::map<void*, unsigned long long> graph_memory_;  // blocks allocated while capturing: the capture's id
  std::vector<void*> held_for_capture_;               // freed during a capture that did not allocate them
  int64_t reserved_ = 0;
};

Allocator* CudaAllocatorForIndex(int index) {
  static std::mutex mu;
  static std::vector<CudaAllocator*>* allocators = new std::vector<CudaAllocator*>();
  std::lock_guard<std::mutex> lock(mu);
  if (index < 0 || index >= kMaxDevices) Fatal("CUDA device index " + std::to_string(index) + " out of range");
  if (static_cast<int>(allocators->size()) <= index) allocators->resize(index + 1, nullptr);
  if ((*allocators)[index] == nullptr) (*allocators)[index] = new CudaAllocator(index);
  return (*allocators)[index];
}

// Page-locked host blocks, cached by exact size: cudaFreeHost synchronizes
// the device, so staging buffers are never given back while training.
class PinnedAllocator final : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override {
    const size_t size = bytes == 0 ? 1 : bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* ptr = it->second;
        free_.erase(it);
        RecordAllocation(bytes);
        return ptr;
      }
    }
    void* ptr = nullptr;
    const cudaError_t error = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      Fatal("out of page-locked host memory asking for " + MiB(bytes));
    }
    Check(error, "cudaHostAlloc", __FILE__, __LINE__);
    RecordAllocation(bytes);
    return ptr;
  }
  void Deallocate(void* ptr, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(bytes == 0 ? 1 : bytes, ptr);
    RecordDeallocation(bytes);
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
};

void CheckSameElements(const Tensor& src, const Tensor& dst, const char* what) {
  if (src.numel() != dst.numel() || src.dtype() != dst.dtype()) {
    std::fprintf(stderr, "%s: %s into %s\n", what, src.DebugString().c_str(), dst.DebugString().c_str());
    std::abort();
  }
}

// The stream a copy between `src` and `dst` runs on: the current stream of
// the device involved.
void* CopyStream(const Tensor& src, const Tensor& dst) {
  const Device d = dst.device().is_cuda() ? dst.device() : src.device();
  return g_current_stream[d.index];
}

// A copy involving host memory returns once done: the host may then read
// the result, and free or rewrite the source (a pinned one would otherwise
// still be read by the DMA). Device-to-device copies stay asynchronous.
// (A copy to or from pageable memory may itself block until the stream's
// earlier work is done: waiting for that first, by polling, keeps the wait
// watchdog in charge.)
void DeviceCopy(const Tensor& src, Tensor& dst) {
  const bool host = dst.device().is_cpu() || src.device().is_cpu();
  if (host) Synchronize(CopyStream(src, dst));
  CopyTensorAsync(src, dst, CopyStream(src, dst));
  if (host) Synchronize(CopyStream(src, dst));
}

template <typename T>
__global__ void FillKernel(T* data, int64_t n, T value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = value;
  }
}

template <typename T>
void LaunchFill(void* data, int64_t n, T value, cudaStream_t stream) {
  const int64_t blocks = (n + 255) / 256;
  FillKernel<T><<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(static_cast<T*>(data), n,
                                                                                          value);
  Check(cudaGetLastError(), "FillKernel launch", __FILE__, __LINE__);
}

void DeviceFill(Tensor& t, double value) {
  const Device d = t.device();
  DeviceGuard guard(d.index);
  cudaStream_t stream = static_cast<cudaStream_t>(g_current_stream[d.index]);
  if (value == 0.0 && !std::signbit(value)) {
    Check(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), stream), "cudaMemsetAsync", __FILE__, __LINE__);
    return;
  }
  // The value's bit pattern in the tensor's dtype, written element by element.
  Tensor one = Tensor::Empty({1}, t.dtype());
  one.Fill(value);
  switch (DTypeSize(t.dtype())) {
    case 1: LaunchFill<uint8_t>(t.raw_data(), t.numel(), *static_cast<uint8_t*>(one.raw_data()), stream); break;
    case 2: LaunchFill<uint16_t>(t.raw_data(), t.numel(), *static_cast<uint16_t*>(one.raw_data()), stream); break;
    case 4: LaunchFill<uint32_t>(t.raw_data(), t.numel(), *static_cast<uint32_t*>(one.raw_data()), stream); break;
    case 8: LaunchFill<uint64_t>(t.raw_data(), t.numel(), *static_cast<uint64_t*>(one.raw_data()), stream); break;
    default: Fatal("Tensor::Fill: unsupported element size");
  }
}

const bool kRegistered = [] {
  RegisterAllocator(DeviceType::kCUDA, &CudaAllocatorForIndex);
  DeviceTensorOps ops;
  ops.copy = &DeviceCopy;
  ops.fill = &DeviceFill;
  RegisterDeviceTensorOps(DeviceType::kCUDA, ops);
  return true;
}();

}  // namespace

DeviceQuery QueryDevices() {
  DeviceQuery query;
  const cudaError_t error = cudaGetDeviceCount(&query.count);
  if (error == cudaSuccess) return query;
  cudaGetLastError();  // clear the sticky error
  query.count = 0;
  if (error == cudaErrorNoDevice) return query;
  // The runtime says "insufficient driver" also where no driver is
  // installed at all (a CPU machine): that is no device, not an error.
  if (error == cudaErrorInsufficientDriver) {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return query;
    dlclose(driver);
  }
  query.error = std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")";
  return query;
}

int DeviceCount() { return QueryDevices().count; }

void Check(int error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: CUDA call %s failed: %s (%s)\n", file, line, call,
               cudaGetErrorString(static_cast<cudaError_t>(error)), cudaGetErrorName(static_cast<cudaError_t>(error)));
  std::abort();
}

void SetDevice(int index) { Check(cudaSetDevice(index), "cudaSetDevice", __FILE__, __LINE__); }

std::string DeviceUuid(int index) {
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", __FILE__, __LINE__);
  const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return text;
}

std::string DeviceDescription(int index) {
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", __FILE__, __LINE__);
  char text[512];
  std::snprintf(text, sizeof(text), "%s, compute capability %d.%d, %.1f GiB", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string PciAddress(int index) {
  char id[32] = {0};
  Check(cudaDeviceGetPCIBusId(id, sizeof(id), index), "cudaDeviceGetPCIBusId", __FILE__, __LINE__);
  std::string out = id;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool CanAccessPeer(int a, int b) {
  int can = 0;
  Check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer", __FILE__, __LINE__);
  return can != 0;
}

std::string DeviceName(int index) {
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", __FILE__, __LINE__);
  return prop.name;
}

namespace {
__host__ __device__ __forceinline__ uint32_t PeerPattern(size_t i) { return static_cast<uint32_t>(i) * 2654435761u + 12345u; }

__global__ void PeerWriteKernel(uint32_t* peer, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    peer[i] = PeerPattern(i);
  }
}
}  // namespace

PeerCopyResult CheckPeerCopy(int from, int to, size_t bytes) {
  PeerCopyResult r;
  const size_t n = bytes / sizeof(uint32_t);
  uint32_t* peer = nullptr;
  auto failed = [&](cudaError_t e, const char* call) {
    r.error = std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
    cudaGetLastError();
    return r;
  };
  cudaError_t e = cudaSetDevice(to);
  if (e != cudaSuccess) return failed(e, "cudaSetDevice");
  if ((e = cudaMalloc(&peer, n * sizeof(uint32_t))) != cudaSuccess) return failed(e, "cudaMalloc");
  if ((e = cudaMemset(peer, 0, n * sizeof(uint32_t))) != cudaSuccess) return failed(e, "cudaMemset");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return failed(e, "cudaDeviceSynchronize");
  if ((e = cudaSetDevice(from)) != cudaSuccess) return failed(e, "cudaSetDevice");
  e = cudaDeviceEnablePeerAccess(to, 0);
  if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) return failed(e, "cudaDeviceEnablePeerAccess");
  cudaGetLastError();
  PeerWriteKernel<<<64, 256>>>(peer, n);
  if ((e = cudaGetLastError()) != cudaSuccess) return failed(e, "PeerWriteKernel launch");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return failed(e, "cudaDeviceSynchronize");
  std::vector<uint32_t> back(n);
  if ((e = cudaSetDevice(to)) != cudaSuccess) return failed(e, "cudaSetDevice");
  if ((e = cudaMemcpy(back.data(), peer, n * sizeof(uint32_t), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return failed(e, "cudaMemcpy");
  }
  r.data_ok = true;
  for (size_t i = 0; i < n && r.data_ok; ++i) {
    r.data_ok = back[i] == PeerPattern(i);
  }
  if ((e = cudaFree(peer)) != cudaSuccess) return failed(e, "cudaFree");
  return r;
}

int64_t DeviceBytesInUse(int device, std::string* error) {
  size_t free_bytes = 0, total = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // the context, created now if not yet
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total);
  if (e != cudaSuccess) {
    *error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    (void)cudaGetLastError();  // not sticky: the next call starts clean
    return -1;
  }
  return static_cast<int64_t>(total - free_bytes);
}

int DriverVersion() {
  int v = 0;
  Check(cudaDriverGetVersion(&v), "cudaDriverGetVersion", __FILE__, __LINE__);
  return v;
}

int RuntimeVersion() {
  int v = 0;
  Check(cudaRuntimeGetVersion(&v), "cudaRuntimeGetVersion", __FILE__, __LINE__);
  return v;
}

void* CreateStream() {
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", __FILE__, __LINE__);
  return stream;
}

void DestroyStream(void* stream) {
  Check(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "cudaStreamDestroy", __FILE__, __LINE__);
}

void SetWaitWatchdog(std::string (*watchdog)(double)) { g_watchdog.store(watchdog); }

namespace {
__global__ void BusyKernel(unsigned long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
}  // namespace

void BusyStream(void* stream, double seconds) {
  BusyKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned long long>(seconds * 1e9));
  Check(cudaGetLastError(), "BusyKernel launch", __FILE__, __LINE__);
}

void WaitForEvent(void* event) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) Check(e, "cudaEventQuery", __FILE__, __LINE__);
    std::string (*watchdog)(double) = g_watchdog.load();
    if (watchdog != nullptr) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string why = watchdog(waited);
      if (!why.empty()) Fatal(why);
    }
    // Spin briefly (most waits are short), then yield the core.
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void Synchronize(void* stream) {
  cudaEvent_t event = nullptr;
  Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags", __FILE__, __LINE__);
  Check(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord", __FILE__, __LINE__);
  WaitForEvent(event);
  Check(cudaEventDestroy(event), "cudaEventDestroy", __FILE__, __LINE__);
}

void SetCurrentStream(int device, void* stream) {
  if (device < 0 || device >= kMaxDevices) Fatal("CUDA device index " + std::to_string(device) + " out of range");
  g_current_stream[device] = stream;
}

void* CurrentStream(int device) { return g_current_stream[device]; }

void* CreateEvent() {
  cudaEvent_t event = nullptr;
  Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags", __FILE__, __LINE__);
  return event;
}

void* CreateTimingEvent() {
  cudaEvent_t event = nullptr;
  Check(cudaEventCreate(&event), "cudaEventCreate", __FILE__, __LINE__);
  return event;
}

double ElapsedSeconds(void* start, void* end) {
  if (!EventDone(start) || !EventDone(end)) return -1.0;
  float ms = 0.0f;
  Check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "cudaEventElapsedTime", __FILE__, __LINE__);
  return ms / 1000.0;
}

void DestroyEvent(void* event) {
  Check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy", __FILE__, __LINE__);
}

void RecordEvent(void* event, void* stream) {
  Check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)), "cudaEventRecord",
        __FILE__, __LINE__);
}

void StreamWaitEvent(void* stream, void* event) {
  Check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent", __FILE__, __LINE__);
}

bool EventDone(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) return false;
  Check(e, "cudaEventQuery", __FILE__, __LINE__);
  return true;
}

void EventSynchronize(void* event) { WaitForEvent(event); }

void BeginCapture(void* stream) {
  Check(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture", __FILE__, __LINE__);
}

void* EndCapture(void* stream) {
  cudaGraph_t graph = nullptr;
  Check(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph),
        "cudaStreamEndCapture (an operation in the captured step broke the capture)", __FILE__, __LINE__);
  cudaGraphExec_t exec = nullptr;
  Check(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
        "cudaGraphInstantiateWithFlags", __FILE__, __LINE__);
  Check(cudaGraphDestroy(graph), "cudaGraphDestroy", __FILE__, __LINE__);
  return exec;
}

void ReleaseMemoryHeldForCapture(int device) {
  static_cast<CudaAllocator*>(CudaAllocatorForIndex(device))->ReleaseHeldForCapture();
}

void TrimMemoryPools(int device) { static_cast<CudaAllocator*>(CudaAllocatorForIndex(device))->TrimPools(); }

void AbortCapture(void* stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  if (ended == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();  // an invalidated capture leaves its error behind; the caller reports its own
}

void LaunchGraph(void* graph, void* stream) {
  Check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)), "cudaGraphLaunch",
        __FILE__, __LINE__);
}

void DestroyGraph(void* graph) {
  if (graph != nullptr) Check(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)), "cudaGraphExecDestroy", __FILE__, __LINE__);
}

bool IsCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  Check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status), "cudaStreamIsCapturing", __FILE__,
        __LINE__);
  return status != cudaStreamCaptureStatusNone;
}

void CopyTensorAsync(const Tensor& src, Tensor& dst, void* stream) {
  CheckSameElements(src, dst, "cuda::CopyTensor");
  if (src.nbytes() == 0) return;
  Check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync", __FILE__, __LINE__);
}

void CopyTensor(const Tensor& src, Tensor& dst, void* stream) {
  CopyTensorAsync(src, dst, stream);
  Synchronize(stream);
}

Allocator* PinnedHostAllocator() {
  static PinnedAllocator* allocator = new PinnedAllocator();
  return allocator;
}

MemoryStats GetMemoryStats(int device) {
  CudaAllocator* a = static_cast<CudaAllocator*>(CudaAllocatorForIndex(device));
  MemoryStats stats;
  stats.allocated = a->bytes_in_use();
  stats.peak_allocated = a->peak_bytes_in_use();
  stats.reserved = a->reserved_bytes();
  stats.pooled = a->pooled();
  return stats;
}


}  // namespace ddp::cuda
