// The CUDA runtime as the rest of the code sees it, with no CUDA headers:
// device discovery, checked calls, streams and events (as opaque handles),
// the device memory allocator and copies. In a build without CUDA,
// DeviceCount() is 0 and nothing else may be called.
//
// Streams: each rank runs its kernels on one compute stream, which it makes
// the device's *current stream*. Device memory is allocated and freed in
// that stream's order (cudaMallocAsync pools, cached without limit), and
// Tensor::CopyFrom / Fill on device tensors run on it. Work on another
// stream (NCCL's) that reads a tensor must be waited on by the current
// stream before the tensor is freed, so a later allocation on the current
// stream can never reuse memory still in use.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace ddp::cuda {

// True when this binary was built with CUDA kernels.
bool BuiltWithCuda();
// What the driver shows this process. `count` is 0 without CUDA in the
// build, without the NVIDIA driver's library (libcuda.so.1), or with no GPU
// visible (CUDA_VISIBLE_DEVICES is respected by the driver): "no device",
// and `error` is empty. Where the driver is there but CUDA cannot start (a
// driver older than the runtime, a failed initialization, a broken
// install), `count` is 0 and `error` says why, as CUDA names it.
struct DeviceQuery {
  int count = 0;
  std::string error;
};
DeviceQuery QueryDevices();
// QueryDevices().count.
int DeviceCount();
// Fatal unless `error` (a cudaError_t) is cudaSuccess; names the call and
// CUDA's reason.
void Check(int error, const char* call, const char* file, int line);
void SetDevice(int index);
// The device's UUID as nvidia-smi prints it ("GPU-6a1b2c3d-..."): the same
// physical GPU gives the same string in every process, whatever
// CUDA_VISIBLE_DEVICES calls it.
std::string DeviceUuid(int index);
// "NVIDIA H200, compute capability 9.0, 139.8 GiB".
std::string DeviceDescription(int index);
// The device's PCI address as sysfs names it ("0000:01:00.0", lower case).
std::string PciAddress(int index);
// Whether device `a` can reach device `b`'s memory directly (peer to peer).
bool CanAccessPeer(int a, int b);
// The device's name ("NVIDIA GeForce RTX 4090").
std::string DeviceName(int index);
// A peer-to-peer write as NCCL's kernels make one: a kernel on `from`
// stores a pattern of `bytes` into memory on `to` through peer access
// (enabled here), then the host reads it back from `to`. `error` is the
// failed call and CUDA's reason; `data_ok` whether the pattern arrived.
// Where a platform's peer access is broken this may hang: run it in a
// child process under a deadline (launch/peer_access.h).
struct PeerCopyResult {
  std::string error;
  bool data_ok = false;
};
PeerCopyResult CheckPeerCopy(int from, int to, size_t bytes);
// Versions as numbers: the driver's CUDA (e.g. 13000) and the runtime's.
int DriverVersion();
int RuntimeVersion();

// A new stream on the current device that does not synchronize with the
// legacy default stream.
void* CreateStream();
void DestroyStream(void* stream);
// Waits for all work on `stream` (null: the legacy default stream). Every
// host wait on the GPU (this, EventSynchronize, copies to the host, a loss
// read) polls and calls the wait watchdog between polls, so a collective
// that will never finish (a dead peer) ends the process with one line
// instead of hanging it.
void Synchronize(void* stream);
// Keeps `stream` busy for `seconds` (one thread of a kernel that watches
// the GPU's clock): what a stuck collective looks like to everything queued
// after it, for tests of the wait watchdog.
void BusyStream(void* stream, double seconds);
// The watchdog: given the seconds waited so far, an empty string while all
// is well, else the line to end the process with (the NCCL communicator
// installs one that reads NCCL's error state and applies its timeout).
// Null removes it.
void SetWaitWatchdog(std::string (*watchdog)(double waited_seconds));
// The device's current stream (initially null, the legacy default stream),
// which allocation and tensor copies use.
void SetCurrentStream(int device, void* stream);
void* CurrentStream(int device);

// Events without timing, for ordering streams and polling completion.
void* CreateEvent();
// An event that records when it happened on the GPU, and the seconds
// between two that have (-1 while either has not).
void* CreateTimingEvent();
double ElapsedSeconds(void* start, void* end);
// Polls `event` (through the watchdog) until it has happened.
void WaitForEvent(void* event);
void DestroyEvent(void* event);
void RecordEvent(void* event, void* stream);
void StreamWaitEvent(void* stream, void* event);
bool EventDone(void* event);
void EventSynchronize(void* event);

// The GPU time between Start and Stop on a stream (events made on first
// use): Seconds() once both have happened, else -1.
class IntervalTimer {
 public:
  IntervalTimer() = default;
  IntervalTimer(const IntervalTimer&) = delete;
  IntervalTimer& operator=(const IntervalTimer&) = delete;
  ~IntervalTimer() {
    if (start_ != nullptr) DestroyEvent(start_);
    if (stop_ != nullptr) DestroyEvent(stop_);
  }
  void Start(void* stream) {
    if (start_ == nullptr) start_ = CreateTimingEvent(), stop_ = CreateTimingEvent();
    RecordEvent(start_, stream);
  }
  void Stop(void* stream) { RecordEvent(stop_, stream); }
  double Seconds() const { return ElapsedSeconds(start_, stop_); }

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// CUDA Graphs. BeginCapture starts recording `stream`'s work instead of
// running it; capture is thread-local (cudaStreamCaptureModeThreadLocal),
// so a call from this thread that would synchronize fails the capture
// while other threads (the data stager) go on. EndCapture instantiates what
// was recorded (allocations made while capturing are freed before each
// relaunch, cudaGraphInstantiateFlagAutoFreeOnLaunch) and returns the
// executable graph; a failed capture is fatal, naming the call that broke
// it. LaunchGraph replays it on `stream`.
void BeginCapture(void* stream);
void* EndCapture(void* stream);
// Ends a capture that went wrong (the caller has the error to report) and
// discards what was recorded.
void AbortCapture(void* stream);
void LaunchGraph(void* graph, void* stream);
void DestroyGraph(void* graph);
// Under the pooled allocator, memory from outside a capture that is freed
// while capturing stays allocated (captured work may still read it); once
// the graphs captured on `device` are destroyed, this frees it.
void ReleaseMemoryHeldForCapture(int device);
// Waits for the device's current stream, then returns the memory the pool
// and the graphs hold unused to the device: before a capture, so the
// graph's own memory does not come on top of the eager steps' cached blocks.
void TrimMemoryPools(int device);
// Whether `stream` is being captured (work on it is recorded, not run, and
// events recorded on it cannot be queried).
bool IsCapturing(void* stream);

// Copies between host and device tensors of equal dtype and element count,
// in either direction, on `stream`; returns once the copy is done.
void CopyTensor(const Tensor& src, Tensor& dst, void* stream);
// The same without waiting (pinned host memory makes it truly asynchronous).
void CopyTensorAsync(const Tensor& src, Tensor& dst, void* stream);

// Page-locked host memory (cudaHostAlloc), cached when freed: staging
// buffers for asynchronous copies. Tensors from it are host tensors.
Allocator* PinnedHostAllocator();

struct MemoryStats {
  int64_t allocated = 0;       // bytes in tensors now
  int64_t peak_allocated = 0;  // the most at once since the last ResetPeak
  int64_t reserved = 0;        // held from the driver by the pool
  bool pooled = false;         // cudaMallocAsync pool (else the cudaMalloc cache)
};
MemoryStats GetMemoryStats(int device);

// The device's memory in use by every process (total less free), after
// this process's context on it exists: on a GPU nothing else uses, the
// context's own bytes (the memory planner's overhead). -1, with CUDA's
// reason in `error`, where the context cannot be made (a GPU held in
// exclusive mode by another process).
int64_t DeviceBytesInUse(int device, std::string* error);

// The largest power of two (up to 256) that divides the address. cuBLASLt's
// heuristics and cuDNN's tensor-core algorithms assume aligned buffers, and
// views into the flat parameter buffers are only 4-byte aligned (2-byte for
// the 16-bit copy): GEMM preferences and algorithm caches are keyed by it.
inline uint32_t AddressAlignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace ddp::cuda

#define DDP_CUDA_CHECK(call) ::ddp::cuda::Check(static_cast<int>(call), #call, __FILE__, __LINE__)
