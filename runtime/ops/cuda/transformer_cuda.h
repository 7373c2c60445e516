// CUDA kernels behind runtime/ops/transformer.h, with the CPU ops'
// semantics and argument checks done by the caller. Own kernels throughout
// (cuBLASLt's GELU epilogue is the tanh form, not BERT's erf): embedding
// lookup and its ordered scatter-add, LayerNorm in double per row, the erf
// GELU, tanh, the head permutations, Philox dropout (the CPU's masks, bit for
// bit) and the masked softmax. Every reduction runs in a fixed order, so
// results repeat run to run; the embedding gradient and the dropout masks
// equal the CPU's exactly.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/transformer.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

void EmbeddingForward(ExecutionContext& ctx, const Tensor& weight, const Tensor& ids, Tensor& out);
void EmbeddingBackward(ExecutionContext& ctx, const Tensor& ids, const Tensor& dout, Tensor& dweight,
                       int64_t padding_idx);
void LayerNormForward(ExecutionContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                      Tensor& y, Tensor& mean, Tensor& rstd);
void LayerNormBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
void GeluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void GeluBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
void TanhForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void TanhBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
// [N * T, heads * d] <-> [N * heads, T, d] (`to_heads` picks the direction).
void PermuteHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out, bool to_heads);
// The key words and the per-sample layout as the CPU op computes them;
// `keep` may be null (no mask written).
void DropoutForward(ExecutionContext& ctx, const Tensor& x, float p, uint32_t key0, uint32_t key1, int64_t step,
                    int64_t first_sample, Tensor& y, uint8_t* keep);
void DropoutBackward(ExecutionContext& ctx, const Tensor& dy, const Tensor& keep, float p, Tensor& dx);
void MaskedSoftmaxForward(ExecutionContext& ctx, const Tensor& scores, const Tensor* key_mask, Tensor& probs);
void SoftmaxBackward(ExecutionContext& ctx, const Tensor& probs, const Tensor& dprobs, Tensor& dscores);

}  // namespace ddp::cuda
