// Matrix products on CUDA through cuBLASLt, on row-major f32 matrices as
// runtime/ops/linear.h defines them. fp32 computes with CUBLAS_COMPUTE_32F
// (no TF32); ctx.allow_tf32() selects CUBLAS_COMPUTE_32F_FAST_TF32. The
// linear bias rides in the matmul's bias epilogue. With ctx.deterministic(),
// only algorithms without split-K are taken, so results repeat bit for bit.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

// `count` products of one shape in one call (a strided batch): the i-th
// reads A at a + i * stride_a, B at b + i * stride_b and writes C at
// c + i * stride_c (strides in elements).
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// C[M, N] = alpha * op(A) * op(B) + beta * C (+ bias[N] on every row, when
// `bias` is not null), for each product of `batch`. Leading dimensions are
// the row lengths as stored. A and B are of type `ab` (f32; or bf16 or f16
// for mixed precision, on tensor cores with f32 accumulation), C of type
// `cd` (f32, or `ab` when 16-bit); alpha and beta are f32, the bias of C's
// type (cuBLASLt's bias epilogue: PyTorch autocast's 16-bit bias too).
void Gemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
          const void* bias, DType ab = DType::kF32, DType cd = DType::kF32, const GemmBatch& batch = {});
// out[cols] (f32) = the sum over rows of m[rows, cols] (the bias gradient;
// m of `dtype`: f32, bf16 or f16), in double, in a fixed order.
void SumRows(ExecutionContext& ctx, const void* m, DType dtype, int64_t rows, int64_t cols, float* out);

}  // namespace ddp::cuda
