// Scaled dot-product attention, BERT's:
//   context = dropout(softmax(q k^T / sqrt(d) + mask)) v
// with q, k, v and context [N * heads, T, d] (SplitHeads' layout), an
// optional key mask i64 [N, T] (1 attend, 0 padding: Hugging Face's
// additive mask), and dropout of the probabilities keyed as DESIGN.md's
// contract has it (the seed, step and site in `key`, each sample's global
// index from `first_sample`; element (head, row, column) of the sample).
//
// The op is fused on a CPU (runtime/ops/cpu/attention_cpu.h) and, for heads
// of 64, on CUDA (runtime/ops/cuda/attention_cuda.h), and in plans of
// either: it keeps no seq x seq matrix, only the output and one f32
// log-sum-exp a row; backward makes the probabilities and the dropout mask
// again, tile by tile. Other head sizes on CUDA, or any with
// DDP_CUDA_ATTENTION=materialized, make it of the other ops (BatchedGemm,
// MaskedSoftmaxForward, DropoutForward, SoftmaxBackward), which keep the
// probabilities and the mask.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/ops/transformer.h"
#include "runtime/tensor.h"

namespace ddp {

// What backward reads. Fused: each row's log-sum-exp (f32 [N * heads, T])
// and what draws the mask again (CUDA's backward also allocates one f32 a
// row for the row sums it passes between its kernels). Made of ops: the probabilities and the
// dropout mask (undefined when p is 0); the dropped probabilities are made
// again from these two (the same bits as forward's).
struct AttentionSaved {
  Tensor lse, key_mask;
  DropoutKey key;
  int64_t samples = 0, first_sample = 0;
  Tensor probs, keep;
  float p = 0.0f;
};

// `samples` is N (the heads' rows are sample-major); `saved` may be null
// (a forward whose backward recomputes it).
void AttentionForward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t samples,
                      const Tensor* key_mask, float p, const DropoutKey& key, int64_t first_sample, Tensor& context,
                      AttentionSaved* saved);
// dq, dk and dv (overwritten) from dcontext and the forward's `saved`.
void AttentionBackward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionSaved& saved, const Tensor& dcontext, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace ddp
