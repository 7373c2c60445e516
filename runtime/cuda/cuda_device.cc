#include "runtime/cuda/cuda_device.h"

#include "runtime/cuda/cuda_runtime_impl.h"

namespace ddp::cuda {

bool BuiltWithCuda() {
#ifdef DDP_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int DeviceCount() {
#ifdef DDP_HAVE_CUDA
  return impl::DeviceCount();
#else
  return 0;
#endif
}

#ifdef DDP_HAVE_CUDA
void Check(int error, const char* call, const char* file, int line) { impl::Check(error, call, file, line); }
void SetDevice(int index) { impl::SetDevice(index); }
std::string DeviceUuid(int index) { return impl::DeviceUuid(index); }
void Synchronize(void* stream) { impl::Synchronize(stream); }
void CopyTensor(const Tensor& src, Tensor& dst, void* stream) { impl::CopyTensor(src, dst, stream); }
#else
namespace {
[[noreturn]] void NoCuda(const char* what) {
  LOG(FATAL) << what << ": this binary was built without CUDA (no nvcc at build time)";
}
}  // namespace
void Check(int, const char* call, const char*, int) { NoCuda(call); }
void SetDevice(int) { NoCuda("cuda::SetDevice"); }
std::string DeviceUuid(int) { NoCuda("cuda::DeviceUuid"); }
void Synchronize(void*) { NoCuda("cuda::Synchronize"); }
void CopyTensor(const Tensor&, Tensor&, void*) { NoCuda("cuda::CopyTensor"); }
#endif

}  // namespace ddp::cuda
