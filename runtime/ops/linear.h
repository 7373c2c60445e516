// Fully connected layer math, as torch.nn.functional.linear:
// y[N, out] = x[N, in] * w[out, in]^T + b[out]. Matrix products go to
// oneDNN's GEMM.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

// x and w share a dtype: f32, or 16-bit for mixed precision (f32
// accumulation), when y is f32 or that 16-bit type. `bias` (may be null)
// is of y's dtype: with a 16-bit y, the bias is rounded to 16 bits as
// PyTorch's autocast does.
void LinearForward(ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);
// dx = dy * w. `dx` may be null when the input needs no gradient.
void LinearBackwardData(ExecutionContext& ctx, const Tensor& dy, const Tensor& w, Tensor* dx);
// dw = dy^T * x and dbias = column sums of dy (if not null); dw and dbias
// are f32 (the master weights' dtype) whatever dy's and x's.
void LinearBackwardWeights(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* dbias);

// C[M, N] = alpha * op(A) * op(B) + beta * C on row-major f32 matrices, where
// op(X) is X or its transpose. The GEMM behind linear and, later, attention.
void Gemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c);

// The same for each matrix of 3-D tensors, over their leading batch
// dimension: c[i] = alpha * op(a[i]) * op(b[i]) + beta * c[i]. a and b are
// f32, or 16-bit (f32 accumulation); c is f32 or theirs. Attention's
// Q K^T and P V, and their gradients. One call for all of them: a
// strided-batched cuBLASLt matmul on a GPU, a oneDNN matmul with a batch
// dimension on the CPU.
void BatchedGemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                 const Tensor& b, float beta, Tensor& c);

}  // namespace ddp
