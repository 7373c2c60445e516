#include "runtime/ops/linear.h"

#include "runtime/ops/cpu/linear_cpu.h"
#include "runtime/ops/cuda/gemm_cublaslt.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"

namespace ddp {
namespace {

// The input and weight share a dtype: f32, or 16-bit for mixed precision
// (bf16 on the CPU, bf16 or f16 on CUDA), when the output and its gradient
// may be f32 or that 16-bit type.
void CheckLinear(const ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor& y) {
  CheckActivation(ctx, x, "linear input");
  CHECK(w.dtype() == x.dtype()) << "linear weight " << w.DebugString() << " for input " << x.DebugString();
  if (x.dtype() == DType::kF32) {
    CheckF32(y, "linear output");
  } else {
    CHECK(y.dtype() == DType::kF32 || y.dtype() == x.dtype())
        << "linear output " << y.DebugString() << " for input " << x.DebugString() << ": f32 or the input's dtype";
  }
  CHECK(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2 && x.dim(1) == w.dim(1) && y.dim(0) == x.dim(0) &&
        y.dim(1) == w.dim(0))
      << "linear shapes: input " << x.DebugString() << ", weight " << w.DebugString() << ", output "
      << y.DebugString();
}

// C = op(A) op(B) (+ bias) with 16-bit operands (mixed precision), f32
// accumulation: oneDNN's bf16 matmul on the CPU, cuBLASLt on tensor cores
// on CUDA. An f32 operand (the loss gradient) is rounded to the other's
// type first, into scratch slots 0 and 1.
void LowPrecisionMatmul(ExecutionContext& ctx, bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b,
                        const Tensor* bias, Tensor& c) {
  const DType low = a.dtype() != DType::kF32 ? a.dtype() : b.dtype();
  auto narrow = [&](int slot, const Tensor& t) {
    if (t.dtype() == low) return t;
    Tensor converted = ctx.ScratchTensor(slot, t.shape(), low);
    CastScaled(ctx, t, 1.0f, converted);
    return converted;
  };
  const Tensor a16 = narrow(0, a), b16 = narrow(1, b);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cpu()) return cpu::MatmulBf16(transpose_a, transpose_b, a16, b16, bias, c);
  const int64_t m = c.dim(0), n = c.dim(1), k = transpose_a ? a.dim(0) : a.dim(1);
  DDP_ON_CUDA("LowPrecisionMatmul", cuda::Gemm(ctx, transpose_a, transpose_b, m, n, k, 1.0f, a16.raw_data(),
                                                a16.dim(1), b16.raw_data(), b16.dim(1), 0.0f, c.raw_data(), n,
                                                bias ? bias->raw_data() : nullptr, low, c.dtype()));
}

}  // namespace

void Gemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c) {
  CheckF32(a, "gemm A");
  CheckF32(b, "gemm B");
  CheckF32(c, "gemm C");
  CHECK(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2) << "gemm takes matrices";
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t kb = transpose_b ? b.dim(1) : b.dim(0);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  CHECK(k == kb && c.dim(0) == m && c.dim(1) == n)
      << "gemm shapes: A " << a.DebugString() << (transpose_a ? "^T" : "") << ", B " << b.DebugString()
      << (transpose_b ? "^T" : "") << ", C " << c.DebugString();
  CheckOnDevice(ctx, "Gemm", {&a, &b, &c});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("Gemm", cuda::Gemm(ctx, transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1),
                                          b.data<float>(), b.dim(1), beta, c.data<float>(), n, nullptr));
  }
  cpu::Gemm(transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1), b.data<float>(), b.dim(1), beta,
            c.data<float>(), n);
}

void BatchedGemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                 const Tensor& b, float beta, Tensor& c) {
  CheckActivation(ctx, a, "batched gemm A");
  CHECK(b.dtype() == a.dtype() && (c.dtype() == a.dtype() || c.dtype() == DType::kF32))
      << "batched gemm dtypes: A " << a.DebugString() << ", B " << b.DebugString() << ", C " << c.DebugString()
      << " (A and B alike, C f32 or theirs)";
  CHECK(a.ndim() == 3 && b.ndim() == 3 && c.ndim() == 3 && a.dim(0) == b.dim(0) && a.dim(0) == c.dim(0))
      << "batched gemm takes 3-D tensors of one batch: A " << a.DebugString() << ", B " << b.DebugString() << ", C "
      << c.DebugString();
  const int64_t m = transpose_a ? a.dim(2) : a.dim(1);
  const int64_t k = transpose_a ? a.dim(1) : a.dim(2);
  const int64_t kb = transpose_b ? b.dim(2) : b.dim(1);
  const int64_t n = transpose_b ? b.dim(1) : b.dim(2);
  CHECK(k == kb && c.dim(1) == m && c.dim(2) == n)
      << "batched gemm shapes: A " << a.DebugString() << (transpose_a ? "^T" : "") << ", B " << b.DebugString()
      << (transpose_b ? "^T" : "") << ", C " << c.DebugString();
  CheckOnDevice(ctx, "BatchedGemm", {&a, &b, &c});
  const int64_t a_stride = a.dim(1) * a.dim(2), b_stride = b.dim(1) * b.dim(2), c_stride = m * n;
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {  // one strided-batched call for every matrix
    const cuda::GemmBatch batch{a.dim(0), a_stride, b_stride, c_stride};
    return DDP_ON_CUDA("BatchedGemm", cuda::Gemm(ctx, transpose_a, transpose_b, m, n, k, alpha, a.raw_data(),
                                                 a.dim(2), b.raw_data(), b.dim(2), beta, c.raw_data(), n, nullptr,
                                                 a.dtype(), c.dtype(), batch));
  }
  cpu::BatchedGemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
}

void LinearForward(ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  CheckLinear(ctx, x, w, y);
  if (bias) {
    CHECK(bias->shape() == Shape{w.dim(0)} && bias->dtype() == y.dtype())
        << "linear bias " << bias->DebugString() << " for output " << y.DebugString() << ": of the output's dtype";
    CheckOnDevice(ctx, "LinearForward", {bias});
  }
  if (x.dtype() != DType::kF32) {
    CheckOnDevice(ctx, "LinearForward", {&x, &w, &y});
    return LowPrecisionMatmul(ctx, false, true, x, w, bias, y);
  }
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    CheckOnDevice(ctx, "LinearForward", {&x, &w, &y});
    // The bias rides in the GEMM's epilogue.
    return DDP_ON_CUDA("LinearForward", cuda::Gemm(ctx, false, true, x.dim(0), w.dim(0), x.dim(1), 1.0f,
                                                   x.data<float>(), x.dim(1), w.data<float>(), w.dim(1), 0.0f,
                                                   y.data<float>(), y.dim(1), bias ? bias->data<float>() : nullptr));
  }
  if (bias) cpu::BroadcastRows(bias->data<float>(), y.dim(0), y.dim(1), y.data<float>());
  Gemm(ctx, false, true, 1.0f, x, w, bias ? 1.0f : 0.0f, y);
}

void LinearBackwardData(ExecutionContext& ctx, const Tensor& dy, const Tensor& w, Tensor* dx) {
  if (dx == nullptr) return;
  CheckLinear(ctx, *dx, w, dy);
  if (w.dtype() != DType::kF32) {
    CheckOnDevice(ctx, "LinearBackwardData", {&dy, &w, dx});
    return LowPrecisionMatmul(ctx, false, false, dy, w, nullptr, *dx);
  }
  Gemm(ctx, false, false, 1.0f, dy, w, 0.0f, *dx);
}

void LinearBackwardWeights(ExecutionContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* dbias) {
  if (x.dtype() != DType::kF32) {
    // Weight gradients are f32 (the master weights' dtype).
    CheckActivation(ctx, x, "linear input");
    CHECK(dy.dtype() == x.dtype() || dy.dtype() == DType::kF32)
        << "linear output gradient " << dy.DebugString() << " for input " << x.DebugString();
    CheckF32(dw, "linear weight gradient");
    CHECK(x.ndim() == 2 && dy.ndim() == 2 && dw.ndim() == 2 && dy.dim(0) == x.dim(0) && dw.dim(0) == dy.dim(1) &&
          dw.dim(1) == x.dim(1))
        << "linear shapes: input " << x.DebugString() << ", output gradient " << dy.DebugString()
        << ", weight gradient " << dw.DebugString();
    CheckOnDevice(ctx, "LinearBackwardWeights", {&x, &dy, &dw});
    LowPrecisionMatmul(ctx, true, false, dy, x, nullptr, dw);
  } else {
    CheckLinear(ctx, x, dw, dy);
    Gemm(ctx, true, false, 1.0f, dy, x, 0.0f, dw);
  }
  if (dbias) {
    CHECK(dbias->shape() == Shape{dw.dim(0)}) << "linear bias gradient " << dbias->DebugString();
    CheckF32(*dbias, "linear bias gradient");
    CheckOnDevice(ctx, "LinearBackwardWeights", {dbias});
    if (OnMeta(ctx)) return;
    if (ctx.device().is_cuda()) {
      return DDP_ON_CUDA("LinearBackwardWeights", cuda::SumRows(ctx, dy.raw_data(), dy.dtype(), dy.dim(0), dy.dim(1),
                                                                dbias->data<float>()));
    }
    cpu::SumRows(dy, *dbias);
  }
}

}  // namespace ddp
