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

void ReluBackward(const float* y, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  // PyTorch's threshold_backward: zero where y <= 0, so a NaN output passes dy.
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

}  // namespace ddp::cpu
