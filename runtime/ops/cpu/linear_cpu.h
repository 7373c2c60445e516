// CPU kernels behind runtime/ops/linear.h.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace ddp::cpu {

// Row-major GEMM through oneDNN: C = alpha * op(A) * op(B) + beta * C.
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same for the matrices of 3-D tensors stored one after another (A
// [batch, M, K], or [batch, K, M] transposed; likewise B; C [batch, M, N]),
// in one oneDNN matmul with a batch dimension. A and B are f32, or bf16
// (f32 accumulation); C is f32 or theirs.
void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const Tensor& a,
                 const Tensor& b, float beta, Tensor& c);
// C[M, N] = op(A) * op(B) (+ bias[N]) with bf16 operands and f32
// accumulation, through oneDNN's matmul: mixed-precision linear layers.
// C is f32 or bf16; `bias` (f32, or bf16 with a bf16 C) may be null.
void MatmulBf16(bool transpose_a, bool transpose_b, const Tensor& a16, const Tensor& b16, const Tensor* bias,
                Tensor& c);
// out[r, :] = row for every r < rows.
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* out);
// out[c] = sum over rows of m[r, c] (m [rows, cols], f32 or bf16; out f32
// [cols]), in double.
void SumRows(const Tensor& m, Tensor& out);

}  // namespace ddp::cpu
