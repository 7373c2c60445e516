// ddp_train --version: what this binary is and what it was built with, one
// line each: the version and git commit; whether CUDA is compiled in, with
// the CUDA runtime, cuDNN, cuBLASLt and NCCL versions its headers had and
// the libraries found now, and the GPU architectures it carries; oneDNN's
// and Open MPI's versions. Needs no GPU and no MPI start.
#pragma once

#include <string>
#include <vector>

namespace ddp {

constexpr const char* kDdpTrainVersion = "0.9.0";

std::vector<std::string> VersionLines();

// "2.28.3" from NCCL's 22803, "9.10.0" from cuDNN's 91000, "13.0" from
// CUDA's 13000: `code` in the library's own scheme.
std::string DottedVersion(long code, const std::string& library);

}  // namespace ddp
