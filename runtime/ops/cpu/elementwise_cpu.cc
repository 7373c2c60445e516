#include "runtime/ops/cpu/elementwise_cpu.h"

namespace ddp::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelThreshold = 1 << 15;

}  // namespace

void Add(const float* a, const float* b, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void Scale(float alpha, float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void ReluForward(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  // NaN stays NaN, as in PyTorch (x > 0 alone would map it to 0 and hide it).
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
}

void CastScaled(const Tensor& src, float scale, Tensor& dst) {
  const int64_t n = src.numel();
  if (src.dtype() == DType::kF32) {
    const float* s = src.data<float>();
    if (dst.dtype() == DType::kBF16) {
      BFloat16* d = dst.data<BFloat16>();
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(s[i] * scale);
    } else {
      Half* d = dst.data<Half>();
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(s[i] * scale);
    }
    return;
  }
  float* d = dst.data<float>();
  if (src.dtype() == DType::kBF16) {
    const BFloat16* s = src.data<BFloat16>();
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] = BFloat16ToFloat(s[i]) * scale;
  } else {
    const Half* s = src.data<Half>();
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] = HalfToFloat(s[i]) * scale;
  }
}

void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  // PyTorch's threshold_backward: zero where y <= 0, so a NaN output passes dy.
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

}  // namespace ddp::cpu
