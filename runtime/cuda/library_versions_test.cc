// The CUDA libraries link and load: each reports the version its header
// promised. Needs no GPU, so it runs wherever the build has CUDA.
#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"

#ifdef DDP_HAVE_CUDA
#include "runtime/cuda/library_versions.h"
#endif

namespace ddp {
namespace {

TEST(CudaLibraryVersionsTest, RuntimeMatchesHeaders) {
#ifndef DDP_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const cuda::LibraryVersions v = cuda::GetLibraryVersions();
  std::printf("cuDNN %ld (header %ld), cuBLASLt %ld (header %ld), NCCL %d (header %d)\n", v.cudnn_runtime,
              v.cudnn_header, v.cublaslt_runtime, v.cublaslt_header, v.nccl_runtime, v.nccl_header);
  // Majors only, as the self-test's versions tier checks: at run time cuDNN
  // and NCCL may come from PyTorch's wheels, whose minors differ from the
  // headers' while the ABI of the major holds.
  EXPECT_EQ(v.cudnn_runtime / 10000, 9) << "cuDNN 9";
  EXPECT_EQ(v.cudnn_runtime / 10000, v.cudnn_header / 10000) << "cuDNN major matches its header";
  EXPECT_EQ(v.cublaslt_runtime / 10000, v.cublaslt_header / 10000) << "cuBLASLt major matches its header";
  EXPECT_EQ(v.nccl_runtime / 10000, 2) << "NCCL 2";
  EXPECT_EQ(v.nccl_runtime / 10000, v.nccl_header / 10000) << "NCCL major matches its header";
#endif
}

}  // namespace
}  // namespace ddp
