// CUDA kernels behind runtime/ops/attention.h: fused attention for head
// size 64 (every BERT's), which keeps no seq x seq matrix. Forward keeps the
// output and one f32 log-sum-exp a row (online softmax over tiles of 64
// keys). Backward makes the probabilities and the dropout factors again,
// tile by tile, in two kernels that need no atomics, so results repeat run
// to run: one a block of query rows (the row sums D = sum_j P dP, then dQ),
// one a block of keys (dK and dV). The dropout factors are the CPU op's
// Philox draws, element (head, row, column) of each sample.
//
// bf16 and f16 go through tensor cores (WMMA 16x16x16, f32 accumulators);
// the probabilities and dS are rounded to the operand type for their
// products, as FlashAttention and cuDNN do. f32 runs on CUDA cores in f32.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

constexpr int64_t kFusedAttentionHead = 64;

// What one call reads besides its tensors ([N * heads, T, 64] operands of
// one dtype, contiguous, 16-byte aligned).
struct FusedAttentionArgs {
  int64_t samples = 0;
  const int64_t* key_mask = nullptr;  // on the device, i64 [N, T]; null: none
  float p = 0.0f;
  uint32_t key0 = 0, key1 = 0;  // the dropout's Philox key (DropoutPhiloxKey)
  int64_t step = 0, first_sample = 0;
};

// context and lse (f32 [N * heads, T]) from q, k and v.
void FusedAttentionForward(ExecutionContext& ctx, const FusedAttentionArgs& args, const Tensor& q, const Tensor& k,
                           const Tensor& v, Tensor& context, Tensor& lse);
// dq, dk, dv (overwritten) from the forward's inputs, its lse and
// dcontext; row_dot (f32 [N * heads, T]) is scratch the first kernel fills
// for the second.
void FusedAttentionBackward(ExecutionContext& ctx, const FusedAttentionArgs& args, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& lse, const Tensor& dcontext, Tensor& row_dot, Tensor& dq,
                            Tensor& dk, Tensor& dv);

}  // namespace ddp::cuda
