// Counter-based random values that Python (NumPy) computes bit for bit too:
// golden tests build identical starting weights and batches on both sides
// without shipping them. tests/golden/make_resnet_golden.py holds the twin.
//
//   stream(name) = FNV-1a 64 of the name's bytes
//   bits(stream, i) = splitmix64(splitmix64(stream) + i)
//   uniform = (bits >> 11) * 2^-52 - 1, in [-1, 1)
#pragma once

#include <cstdint>
#include <string>

namespace ddp::testing {

uint64_t PortableStream(const std::string& name);
uint64_t PortableBits(uint64_t stream, uint64_t index);
double PortableUniform(uint64_t stream, uint64_t index);

}  // namespace ddp::testing
