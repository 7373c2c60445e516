// CPU kernels behind runtime/ops/attention.h: fused attention that keeps no
// seq x seq matrix. Each thread takes whole (sample, head) pairs; within a
// pair, queries go in blocks of kAttentionQueryBlock rows against every key
// (a block's scores, Br x T floats, fit in L2), through oneDNN's sgemm.
// Forward keeps the output and one f32 log-sum-exp a row; backward makes
// each block's probabilities and dropout factors again from them.
#pragma once

#include <cstdint>

#include "runtime/ops/transformer.h"
#include "runtime/tensor.h"

namespace ddp::cpu {

constexpr int64_t kAttentionQueryBlock = 64;

// What one call reads besides its tensors: [N * heads, T, d] operands of
// one dtype (f32 or bf16), the key mask's data (i64 [N, T]; null: none),
// and dropout.
struct FusedAttentionArgs {
  int64_t samples = 0;
  const int64_t* key_mask = nullptr;
  float p = 0.0f;
  DropoutKey key;
  int64_t first_sample = 0;
};

// context and lse (f32 [N * heads, T]) from q, k, v.
void FusedAttentionForward(const FusedAttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v,
                           Tensor& context, Tensor& lse);
// dq, dk, dv (overwritten) from the forward's inputs, its lse and
// dcontext. (Each block holds whole rows, so sum_j P dP comes from the
// block itself, not from the context.)
void FusedAttentionBackward(const FusedAttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& lse, const Tensor& dcontext, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace ddp::cpu
