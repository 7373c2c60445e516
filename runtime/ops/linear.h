// Fully connected layer math, as torch.nn.functional.linear:
// y[N, out] = x[N, in] * w[out, in]^T + b[out]. Matrix products go to
// oneDNN's GEMM.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

// `bias` may be null.
void LinearForward(ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);
// dx = dy * w. `dx` may be null when the input needs no gradient.
void LinearBackwardData(ExecutionContext& ctx, const Tensor& dy, const Tensor& w, Tensor* dx);
// dw = dy^T * x and dbias = column sums of dy (if not null).
void LinearBackwardWeights(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* dbias);

// C[M, N] = alpha * op(A) * op(B) + beta * C on row-major f32 matrices, where
// op(X) is X or its transpose. The GEMM behind linear and, later, attention.
void Gemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c);

// The same for each matrix of 3-D f32 tensors, over their leading batch
// dimension: c[i] = alpha * op(a[i]) * op(b[i]) + beta * c[i]. Attention's
// Q K^T and P V, and their gradients. One call for all of them: a
// strided-batched cuBLASLt matmul on a GPU, a oneDNN matmul with a batch
// dimension on the CPU.
void BatchedGemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                 const Tensor& b, float beta, Tensor& c);

}  // namespace ddp
