// Versions of the CUDA libraries this binary links (cuDNN, cuBLASLt, NCCL),
// as they report themselves at run time, and as their headers said at build
// time. No GPU is needed to ask.
#pragma once

namespace ddp::cuda {

struct LibraryVersions {
  long cudnn_runtime = 0, cudnn_header = 0;        // e.g. 91000 for 9.10.0
  long cublaslt_runtime = 0, cublaslt_header = 0;  // e.g. 130000
  int nccl_runtime = 0, nccl_header = 0;           // e.g. 22800 for 2.28.0
  int cudart_header = 0;                           // CUDART_VERSION, e.g. 13000
};

// Fatal if a library call fails (each is checked).
LibraryVersions GetLibraryVersions();

}  // namespace ddp::cuda
