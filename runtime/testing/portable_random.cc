#include "runtime/testing/portable_random.h"

#include "runtime/random.h"

namespace ddp::testing {
uint64_t PortableStream(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t PortableBits(uint64_t stream, uint64_t index) { return SplitMix64(SplitMix64(stream) + index); }

double PortableUniform(uint64_t stream, uint64_t index) {
  return static_cast<double>(PortableBits(stream, index) >> 11) * 0x1p-52 - 1.0;
}

}  // namespace ddp::testing
