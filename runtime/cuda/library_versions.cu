#include "runtime/cuda/library_versions.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

namespace ddp::cuda {

LibraryVersions GetLibraryVersions() {
  LibraryVersions v;
  v.cudnn_runtime = static_cast<long>(cudnnGetVersion());
  v.cudnn_header = CUDNN_VERSION;
  v.cublaslt_runtime = static_cast<long>(cublasLtGetVersion());
  v.cublaslt_header = CUBLAS_VERSION;
  const ncclResult_t result = ncclGetVersion(&v.nccl_runtime);
  if (result != ncclSuccess) {
    std::fprintf(stderr, "ncclGetVersion failed: %s\n", ncclGetErrorString(result));
    std::abort();
  }
  v.nccl_header = NCCL_VERSION_CODE;
  v.cudart_header = CUDART_VERSION;
  return v;
}

}  // namespace ddp::cuda
