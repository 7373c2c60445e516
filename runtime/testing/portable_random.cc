#include "runtime/testing/portable_random.h"

namespace ddp::testing {
namespace {

uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

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
