// gpu_info: what the GPU self-test reports first, as one JSON object: the
// GPUs visible, the driver's and runtime's CUDA versions, and cuDNN,
// cuBLASLt and NCCL as found at run time against the versions this build's
// headers had. Exit status 3 when no GPU is visible (the self-test's "no
// GPU"), 4 when the driver is installed but CUDA cannot start (the object's
// "cuda_error" says why), 0 otherwise. A library that cannot be found stops the program from
// loading at all; selftest.sh reports that by name from the loader.
#include <cstdio>
#include <string>

#include "runtime/cuda/cuda_device.h"
#ifdef DDP_HAVE_CUDA
#include "runtime/cuda/library_versions.h"
#endif

namespace {

std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int main() {
  const ddp::cuda::DeviceQuery query = ddp::cuda::QueryDevices();
  const int gpus = query.count;
  std::printf("{\"built_with_cuda\": %s, \"gpus\": %d", ddp::cuda::BuiltWithCuda() ? "true" : "false", gpus);
  if (!query.error.empty()) std::printf(", \"cuda_error\": \"%s\"", Escaped(query.error).c_str());
#ifdef DDP_HAVE_CUDA
  const ddp::cuda::LibraryVersions v = ddp::cuda::GetLibraryVersions();
  std::printf(
      ", \"cudnn\": {\"found\": %ld, \"built\": %ld}, \"cublaslt\": {\"found\": %ld, \"built\": %ld}, "
      "\"nccl\": {\"found\": %d, \"built\": %d}",
      v.cudnn_runtime, v.cudnn_header, v.cublaslt_runtime, v.cublaslt_header, v.nccl_runtime, v.nccl_header);
  if (gpus > 0) {
    std::printf(", \"device\": \"%s\", \"driver_cuda\": %d, \"runtime_cuda\": %d, \"allocator\": \"%s\"",
                Escaped(ddp::cuda::DeviceDescription(0)).c_str(), ddp::cuda::DriverVersion(),
                ddp::cuda::RuntimeVersion(),
                ddp::cuda::GetMemoryStats(0).pooled ? "cudaMallocAsync pool" : "cudaMalloc cache");
  }
#endif
  std::printf("}\n");
  if (!query.error.empty()) return 4;
  return gpus > 0 ? 0 : 3;
}
