#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_runtime_impl.h"

namespace ddp::cuda::impl {
namespace {

// Plain cudaMalloc/cudaFree for now; the stream-ordered caching allocator
// replaces it when the CUDA training path arrives.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}
  Device device() const override { return Device::Cuda(index_); }
  void* Allocate(size_t bytes) override {
    int previous = 0;
    Check(cudaGetDevice(&previous), "cudaGetDevice", __FILE__, __LINE__);
    Check(cudaSetDevice(index_), "cudaSetDevice", __FILE__, __LINE__);
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
    if (error != cudaSuccess) {
      std::fprintf(stderr, "out of memory on cuda:%d allocating %zu bytes (%lld in use): %s\n", index_, bytes,
                   static_cast<long long>(bytes_in_use()), cudaGetErrorString(error));
      std::abort();
    }
    Check(cudaSetDevice(previous), "cudaSetDevice", __FILE__, __LINE__);
    RecordAllocation(bytes);
    return ptr;
  }
  void Deallocate(void* ptr, size_t bytes) override {
    Check(cudaFree(ptr), "cudaFree", __FILE__, __LINE__);
    RecordDeallocation(bytes);
  }

 private:
  int index_;
};

Allocator* CudaAllocatorForIndex(int index) {
  static std::mutex mu;
  static std::vector<CudaAllocator*>* allocators = new std::vector<CudaAllocator*>();
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(allocators->size()) <= index) allocators->resize(index + 1, nullptr);
  if ((*allocators)[index] == nullptr) (*allocators)[index] = new CudaAllocator(index);
  return (*allocators)[index];
}

const bool kRegistered = [] {
  RegisterAllocator(DeviceType::kCUDA, &CudaAllocatorForIndex);
  return true;
}();

}  // namespace

int DeviceCount() {
  int count = 0;
  // No driver or no visible GPU is not an error here: it means "no devices".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count;
}

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

void Synchronize(void* stream) {
  Check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", __FILE__, __LINE__);
}

void CopyTensor(const Tensor& src, Tensor& dst, void* stream) {
  if (src.numel() != dst.numel() || src.dtype() != dst.dtype()) {
    std::fprintf(stderr, "cuda::CopyTensor: %s into %s\n", src.DebugString().c_str(), dst.DebugString().c_str());
    std::abort();
  }
  Check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync", __FILE__, __LINE__);
  Synchronize(stream);
}

}  // namespace ddp::cuda::impl
