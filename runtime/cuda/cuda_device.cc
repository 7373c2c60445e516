// cuda_device.h in a build without nvcc: no devices, and every other call
// is a bug (callers ask DeviceCount() first). With CUDA, cuda_runtime.cu
// defines these instead.
#include "runtime/cuda/cuda_device.h"

#include <glog/logging.h>

namespace ddp::cuda {

bool BuiltWithCuda() {
#ifdef DDP_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

#ifndef DDP_HAVE_CUDA
namespace {
[[noreturn]] void NoCuda(const char* what) {
  LOG(FATAL) << what << ": this binary was built without CUDA (no nvcc at build time)";
}
}  // namespace

DeviceQuery QueryDevices() { return {}; }
int DeviceCount() { return 0; }
void Check(int, const char* call, const char*, int) { NoCuda(call); }
void SetDevice(int) { NoCuda("cuda::SetDevice"); }
std::string DeviceUuid(int) { NoCuda("cuda::DeviceUuid"); }
std::string DeviceDescription(int) { NoCuda("cuda::DeviceDescription"); }
std::string PciAddress(int) { NoCuda("cuda::PciAddress"); }
bool CanAccessPeer(int, int) { NoCuda("cuda::CanAccessPeer"); }
std::string DeviceName(int) { NoCuda("cuda::DeviceName"); }
int64_t DeviceBytesInUse(int, std::string*) { NoCuda("cuda::DeviceBytesInUse"); }
PeerCopyResult CheckPeerCopy(int, int, size_t) { NoCuda("cuda::CheckPeerCopy"); }
int DriverVersion() { NoCuda("cuda::DriverVersion"); }
int RuntimeVersion() { NoCuda("cuda::RuntimeVersion"); }
void* CreateStream() { NoCuda("cuda::CreateStream"); }
void DestroyStream(void*) { NoCuda("cuda::DestroyStream"); }
void Synchronize(void*) { NoCuda("cuda::Synchronize"); }
void SetWaitWatchdog(std::string (*)(double)) {}
void BusyStream(void*, double) { NoCuda("cuda::BusyStream"); }
void WaitForEvent(void*) { NoCuda("cuda::WaitForEvent"); }
void SetCurrentStream(int, void*) { NoCuda("cuda::SetCurrentStream"); }
void* CurrentStream(int) { NoCuda("cuda::CurrentStream"); }
void* CreateEvent() { NoCuda("cuda::CreateEvent"); }
void* CreateTimingEvent() { NoCuda("cuda::CreateTimingEvent"); }
double ElapsedSeconds(void*, void*) { NoCuda("cuda::ElapsedSeconds"); }
void DestroyEvent(void*) { NoCuda("cuda::DestroyEvent"); }
void RecordEvent(void*, void*) { NoCuda("cuda::RecordEvent"); }
void StreamWaitEvent(void*, void*) { NoCuda("cuda::StreamWaitEvent"); }
bool EventDone(void*) { NoCuda("cuda::EventDone"); }
void EventSynchronize(void*) { NoCuda("cuda::EventSynchronize"); }
void BeginCapture(void*) { NoCuda("cuda::BeginCapture"); }
void* EndCapture(void*) { NoCuda("cuda::EndCapture"); }
void AbortCapture(void*) { NoCuda("cuda::AbortCapture"); }
void LaunchGraph(void*, void*) { NoCuda("cuda::LaunchGraph"); }
void DestroyGraph(void*) { NoCuda("cuda::DestroyGraph"); }
void ReleaseMemoryHeldForCapture(int) { NoCuda("cuda::ReleaseMemoryHeldForCapture"); }
void TrimMemoryPools(int) { NoCuda("cuda::TrimMemoryPools"); }
bool IsCapturing(void*) { return false; }
void CopyTensor(const Tensor&, Tensor&, void*) { NoCuda("cuda::CopyTensor"); }
void CopyTensorAsync(const Tensor&, Tensor&, void*) { NoCuda("cuda::CopyTensorAsync"); }
Allocator* PinnedHostAllocator() { NoCuda("cuda::PinnedHostAllocator"); }
MemoryStats GetMemoryStats(int) { NoCuda("cuda::GetMemoryStats"); }
#endif

}  // namespace ddp::cuda
