// One synthetic sample, element by element: the formulas behind
// SyntheticImages, shared by its host loop and its CUDA kernel so that both
// make the same images. Sample `index` has key SplitMix64(seed ^
// SplitMix64(index)); its label is the key modulo the class count; element
// k of channel ch is the class's offset for ch, plus its pattern (uniform,
// standard deviation 0.5, from the class key and k), plus uniform noise of
// half-width `noise` (from the sample key and k).
#pragma once

#include <cstdint>

#include "runtime/random.h"

namespace ddp::synthetic {

DDP_HOST_DEVICE inline uint64_t SampleKey(uint64_t seed, int64_t index) {
  return SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(index)));
}

DDP_HOST_DEVICE inline int64_t Label(uint64_t key, int64_t num_classes) {
  return static_cast<int64_t>(key % static_cast<uint64_t>(num_classes));
}

DDP_HOST_DEVICE inline uint64_t ClassKey(uint64_t seed, int64_t label) {
  return SplitMix64(SplitMix64(seed ^ 0x5bd1e995ull) + static_cast<uint64_t>(label));
}

// Uniform in [-1, 1) from the high 32 bits.
DDP_HOST_DEVICE inline float Unit(uint64_t bits) {
  return static_cast<float>(bits >> 32) * static_cast<float>(2.0 / 4294967296.0) - 1.0f;
}

DDP_HOST_DEVICE inline float Value(uint64_t key, uint64_t class_key, int64_t k, float offset, float noise) {
  const float pattern = 0.8660254f;  // sqrt(3) / 2: standard deviation 0.5
  const float u_pattern = Unit(SplitMix64(class_key + static_cast<uint64_t>(k)));
  const float u_noise = Unit(SplitMix64(key + static_cast<uint64_t>(k)));
  return offset + pattern * u_pattern + noise * u_noise;
}

}  // namespace ddp::synthetic
