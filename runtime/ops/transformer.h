// The math of BERT's layers, forward and backward, as PyTorch computes it:
// embedding lookup, LayerNorm, the erf form of GELU, dropout, and softmax
// over attention scores with a padding mask (batched matrix products are
// BatchedGemm in runtime/ops/linear.h; the losses are loss.h's
// cross-entropy, whose ignore_index serves the MLM labels' -100).
// On the CPU or CUDA (runtime/ops/cuda/transformer_cuda.h: the same
// semantics, the same dropout masks and embedding gradients bit for bit,
// the rest within float rounding). Activations are f32, or 16-bit for mixed
// precision (bf16 on the CPU, bf16 or f16 on CUDA): each op computes in f32
// (statistics and sums in double) and rounds its result once; parameters,
// their gradients and layer norm's statistics stay f32. Shapes are given
// per function; "rows" are every leading dimension flattened.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

// out[r, :] = weight[ids[r], :], ids i64 of any shape with R elements,
// weight [V, H], out [R, H] (of one dtype). An id outside [0, V) is fatal, naming it (the
// data loader refuses such batches first, naming the tensor).
void EmbeddingForward(ExecutionContext& ctx, const Tensor& weight, const Tensor& ids, Tensor& out);
// dweight = 0, then dweight[ids[r], :] += dout[r, :] for r in order (dout
// and dweight of one dtype; 16-bit sums are rounded as they go):
// repeated ids accumulate, the same way every run. Rows whose id is
// `padding_idx` (>= 0) add nothing, as torch.nn.Embedding(padding_idx=...).
void EmbeddingBackward(ExecutionContext& ctx, const Tensor& ids, const Tensor& dout, Tensor& dweight,
                       int64_t padding_idx = -1);

// Rows of a table [T, H] by index: out[i, :] = table[rows[i], :], one
// launch however many rows (BERT's MLM positions, the pooler's first
// tokens). The embedding lookup's kernel.
inline void GatherRows(ExecutionContext& ctx, const Tensor& table, const Tensor& rows, Tensor& out) {
  EmbeddingForward(ctx, table, rows, out);
}
// Its backward: dtable = 0, then dtable[rows[i], :] += dout[i, :].
inline void ScatterAddRows(ExecutionContext& ctx, const Tensor& rows, const Tensor& dout, Tensor& dtable) {
  EmbeddingBackward(ctx, rows, dout, dtable);
}

// Over the last dimension H of x [R, H]: y = (x - mean) * rstd * gamma +
// beta, rstd = 1 / sqrt(var + eps) with the biased variance, as
// torch.nn.LayerNorm (BERT's eps is 1e-12). mean and rstd ([R], f32) are
// kept for backward.
void LayerNormForward(ExecutionContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                      Tensor& y, Tensor& mean, Tensor& rstd);
// dx, and dgamma and dbeta (overwritten) from the forward's mean and rstd.
void LayerNormBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                       const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))): torch's default GELU, not
// the tanh approximation.
void GeluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void GeluBackward(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);

// y = tanh(x) (BERT's pooler); the backward takes the output:
// dx = dy * (1 - y^2).
void TanhForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
void TanhBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

// Attention's head layout. SplitHeads: x [N * T, heads * d] (rows sample-
// major) to out [N * heads, T, d]; MergeHeads the inverse. Each is the
// other's backward.
void SplitHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out);
void MergeHeads(ExecutionContext& ctx, const Tensor& x, int64_t heads, Tensor& out);

// Which dropout mask: a pure function of the run's seed, the optimizer
// step, the dropout site (layer) and each sample's index in the global
// batch, never of the rank, so N ranks draw exactly the masks one rank with
// N accumulated micro-batches draws.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t site = 0;
};

// x is [N, ...] (N samples, the first of which has global index
// `first_sample`): y = x * keep / (1 - p), keep (u8, one per element) = 1
// where element e of sample s draws u >= p, u from Philox4x32-10 with the
// key and counter DropoutUniform documents. p = 0 copies x and keeps all.
// `keep` may be undefined: no mask is written. Backward without a mask is
// DropoutForward of dy with the same key: the same draws, the same
// expression, so the same bits as DropoutBackward's.
void DropoutForward(ExecutionContext& ctx, const Tensor& x, float p, const DropoutKey& key, int64_t first_sample,
                    Tensor& y, Tensor& keep);
void DropoutBackward(ExecutionContext& ctx, const Tensor& dy, const Tensor& keep, float p, Tensor& dx);
// The uniform draw of element `element` of global sample `sample`: Philox
// counter {element / 4, sample, step low, step high} under the key made of
// SplitMix64(seed ^ SplitMix64(site)); lane element % 4.
float DropoutUniform(const DropoutKey& key, int64_t sample, int64_t element);
// That key's two words, low first: for kernels that draw the mask themselves.
struct DropoutKeyWords {
  uint32_t k0, k1;
};
DropoutKeyWords DropoutPhiloxKey(const DropoutKey& key);
// Elements [first, first + count) of sample `sample`'s mask as the factors
// dropout multiplies by: 1 / (1 - p) where kept, 0 where dropped (the draws
// DropoutForward makes; all 1 for p = 0). For ops that draw the mask again
// rather than keep it (fused attention).
void DropoutScales(const DropoutKey& key, float p, int64_t sample, int64_t first, int64_t count, float* scales);

// probs = softmax over the last dimension of scores [N, heads, Tq, Tk]
// plus, where `key_mask` (i64 [N, Tk], 1 attend, 0 padding; may be null)
// is 0, the lowest f32 value: Hugging Face BERT's additive mask, so a
// padded key gets probability 0 (and a query with every key padded
// attends uniformly, as there).
void MaskedSoftmaxForward(ExecutionContext& ctx, const Tensor& scores, const Tensor* key_mask, Tensor& probs);
// dscores = probs * (dprobs - sum(probs * dprobs)) over the last dimension.
void SoftmaxBackward(ExecutionContext& ctx, const Tensor& probs, const Tensor& dprobs, Tensor& dscores);

}  // namespace ddp
