#include "launch/version.h"

#include <mpi.h>
#include <oneapi/dnnl/dnnl.h>

#include "launch/build_info.h"
#include "runtime/cuda/cuda_device.h"
#ifdef DDP_HAVE_CUDA
#include "runtime/cuda/library_versions.h"
#endif

namespace ddp {

std::string DottedVersion(long code, const std::string& library) {
  auto join = [](long a, long b, long c) {
    return std::to_string(a) + "." + std::to_string(b) + (c >= 0 ? "." + std::to_string(c) : "");
  };
  if (library == "cuda") return join(code / 1000, code % 1000 / 10, -1);        // 13000 -> 13.0
  if (library == "cudnn") return join(code / 10000, code % 10000 / 100, code % 100);  // 91000 -> 9.10.0
  if (library == "cublaslt") return join(code / 10000, code % 10000 / 100, code % 100);  // 130000 -> 13.0.0
  if (library == "nccl") return join(code / 10000, code % 10000 / 100, code % 100);  // 22803 -> 2.28.3
  return std::to_string(code);
}

std::vector<std::string> VersionLines() {
  std::vector<std::string> lines = {std::string("ddp_train ") + kDdpTrainVersion + " (git " + kBuildGitCommit + ")"};
#ifdef DDP_HAVE_CUDA
  const cuda::LibraryVersions v = cuda::GetLibraryVersions();
  auto both = [](long header, long runtime, const std::string& library) {
    const std::string built = DottedVersion(header, library), found = DottedVersion(runtime, library);
    return built + (found == built ? "" : " (" + found + " found)");
  };
  lines.push_back("CUDA: compiled in, built against CUDA " + DottedVersion(v.cudart_header, "cuda") + " (runtime " +
                  DottedVersion(cuda::RuntimeVersion(), "cuda") + "), cuDNN " +
                  both(v.cudnn_header, v.cudnn_runtime, "cudnn") + ", cuBLASLt " +
                  both(v.cublaslt_header, v.cublaslt_runtime, "cublaslt") + ", NCCL " +
                  both(v.nccl_header, v.nccl_runtime, "nccl") + "; GPU code for " + kBuildCudaArchs);
#else
  lines.push_back("CUDA: not compiled in (built without nvcc); CPU ranks only");
#endif
  const dnnl_version_t* dnnl = dnnl_version();
  lines.push_back("oneDNN " + std::to_string(dnnl->major) + "." + std::to_string(dnnl->minor) + "." +
                  std::to_string(dnnl->patch));
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  std::string mpi = "MPI library version unknown";
  if (MPI_Get_library_version(library, &length) == MPI_SUCCESS) {
    mpi = std::string(library, static_cast<size_t>(length));
    mpi = mpi.substr(0, mpi.find(','));  // "Open MPI v4.1.4"
  }
  int major = 0, minor = 0;
  if (MPI_Get_version(&major, &minor) == MPI_SUCCESS) {
    mpi += " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")";
  }
  lines.push_back(mpi);
  return lines;
}

}  // namespace ddp
