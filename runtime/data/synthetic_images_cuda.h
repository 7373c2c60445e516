// SyntheticImages on a GPU: the samples made in device memory by a kernel
// (synthetic_sample.h's formulas), so a benchmark measures training rather
// than host generation and copies. Declared without CUDA types; defined
// only in builds with nvcc (DDP_HAVE_CUDA).
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"

namespace ddp::cuda_synthetic {

// Samples first .. first + count - 1 into images [count, C, plane] and
// labels [count]; `offsets` [num_classes, C] on the device.
void Fill(ExecutionContext& ctx, uint64_t seed, int64_t channels, int64_t plane, int64_t num_classes, float noise,
          const float* offsets, int64_t first, int64_t count, float* images, int64_t* labels);

}  // namespace ddp::cuda_synthetic
