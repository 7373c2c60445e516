// Fused optimizer kernels over every slot at once (multi-tensor apply): the
// slots' elements are cut into chunks, and one launch updates them all, one
// block per chunk. The chunk table lives on the device, built once, since
// slots (views of the flat parameter buffer, or ZeRO's pieces) never move.
// The arithmetic is the CPU optimizers' (runtime/optim/optimizer.cc; Adam's
// moments through runtime/optim/adam_moments.h, as there).
// Declared without CUDA types; defined only in builds with nvcc.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"

namespace ddp::cuda {

// At most this many elements per chunk.
constexpr int64_t kOptimizerChunk = 65536;

struct OptimizerChunk {
  float* w = nullptr;        // master weights
  const float* g = nullptr;  // gradient
  float* m = nullptr;        // SGD momentum, or Adam's first moment (null: none)
  float* v = nullptr;        // Adam's second moment
  int64_t n = 0;
  float weight_decay = 0.0f;
  int32_t param = 0;         // LAMB: which parameter's norms it adds to
};

void SgdStep(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float momentum,
             bool nesterov, bool first_step);
void AdamWStep(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float beta1,
               float beta2, float eps, float step_size, float inv_sqrt_bias2);
// LAMB pass 1: moments, then per parameter the squared norms of w and of
// the update direction, norms[2p] and norms[2p + 1] (f64, num_params * 2),
// summed over its chunks in chunk order. `chunk_norms` holds 2 per chunk.
void LambMoments(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float beta1, float beta2,
                 float eps, float inv_bias1, float inv_sqrt_bias2, double* chunk_norms, int num_params,
                 double* norms);
// LAMB pass 2: w -= lr * trust ratio * direction.
void LambUpdate(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float eps,
                float inv_bias1, float inv_sqrt_bias2, const double* norms);

}  // namespace ddp::cuda
