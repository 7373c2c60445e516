// Scaled dot-product attention, BERT's, as one op pair over the other ops
// (BatchedGemm, MaskedSoftmaxForward, DropoutForward, SoftmaxBackward), so
// it runs on every backend they do:
//   context = dropout(softmax(q k^T / sqrt(d) + mask)) v
// with q, k, v and context [N * heads, T, d] (SplitHeads' layout), an
// optional key mask i64 [N, T] (1 attend, 0 padding: Hugging Face's
// additive mask), and dropout of the probabilities keyed as DESIGN.md's
// contract has it (the seed, step and site in `key`, each sample's global
// index from `first_sample`).
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/ops/transformer.h"
#include "runtime/tensor.h"

namespace ddp {

// What backward reads: the probabilities and the dropout mask (undefined
// when p is 0). The dropped probabilities are not kept: backward makes
// them again from these two (the same bits as forward's), so a layer holds
// 3 bytes a score in 16-bit training rather than 5, or 5 rather than 9 in
// f32, until its backward.
struct AttentionSaved {
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
