#include "runtime/ops/reduce.h"

#include <cmath>

#include "runtime/ops/cuda/loss_reduce_cuda.h"
#include "runtime/ops/op_checks.h"

namespace ddp {

double Sum(ExecutionContext& ctx, const Tensor& x) {
  CheckF32(x, "Sum input");
  CheckOnDevice(ctx, "Sum", {&x});
  if (OnMeta(ctx)) return 0.0;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("Sum", cuda::Sum(ctx, x));
  const float* d = x.data<float>();
  const int64_t n = x.numel();
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) sum += d[i];
  return sum;
}

double SumOfSquares(ExecutionContext& ctx, const Tensor& x) {
  CheckF32(x, "SumOfSquares input");
  CheckOnDevice(ctx, "SumOfSquares", {&x});
  if (OnMeta(ctx)) return 0.0;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("SumOfSquares", cuda::SumOfSquares(ctx, x));
  const float* d = x.data<float>();
  const int64_t n = x.numel();
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(d[i]) * d[i];
  return sum;
}

bool AllFinite(ExecutionContext& ctx, const Tensor& x) {
  CheckF32(x, "AllFinite input");
  CheckOnDevice(ctx, "AllFinite", {&x});
  if (OnMeta(ctx)) return true;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("AllFinite", cuda::AllFinite(ctx, x));
  const float* d = x.data<float>();
  const int64_t n = x.numel();
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(d[i]);
  return bad == 0;
}

}  // namespace ddp
