#include "runtime/ops/cpu/elementwise_cpu.h"

#include "runtime/ops/cpu/float_types.h"

namespace ddp::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelThreshold = 1 << 15;

}  // namespace

void Add(const Tensor& a, const Tensor& b, Tensor& out) {
  DispatchFloat(out.dtype(), "Add", [&](auto tag) {
    using T = decltype(tag);
    const T* ad = Elements<T>(a);
    const T* bd = Elements<T>(b);
    T* od = Elements<T>(out);
    const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) od[i] = FromFloat<T>(ToFloat(ad[i]) + ToFloat(bd[i]));
  });
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void Scale(float alpha, float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

namespace {

// ReLU keeps x where x > 0 or x is NaN (NaN stays NaN, as in PyTorch) and
// zeroes it elsewhere; its backward passes dy where the output passes that
// same test (threshold_backward: zero where y <= 0). Both are selects, so
// exact in any storage type; bf16 selects on the bits, which vectorizes.
void ReluSelect(const float* test, const float* pass, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = test[i] > 0.0f || test[i] != test[i] ? pass[i] : 0.0f;
}

void ReluSelect(const uint16_t* test, const uint16_t* pass, uint16_t* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = test[i];
    // Positive and non-zero (inf and NaN included), or any NaN; as a mask.
    const uint16_t positive = static_cast<uint16_t>(b - 1u) < 0x7fffu;
    const uint16_t nan = (b & 0x7fffu) > 0x7f80u;
    out[i] = pass[i] & static_cast<uint16_t>(-(positive | nan));
  }
}

}  // namespace

void ReluForward(const Tensor& x, Tensor& y) {
  DispatchFloat(y.dtype(), "ReluForward", [&](auto tag) {
    using T = decltype(tag);
    ReluSelect(Elements<T>(x), Elements<T>(x), Elements<T>(y), y.numel());
  });
}

void CastScaled(const Tensor& src, float scale, Tensor& dst) {
  const int64_t n = src.numel();
  if (src.dtype() == DType::kF32) {
    const float* s = src.data<float>();
    if (dst.dtype() == DType::kBF16) {
      uint16_t* d = Elements<uint16_t>(dst);
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) d[i] = FromFloat<uint16_t>(s[i] * scale);
    } else {
      Half* d = dst.data<Half>();
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(s[i] * scale);
    }
    return;
  }
  float* d = dst.data<float>();
  if (src.dtype() == DType::kBF16) {
    const uint16_t* s = Elements<uint16_t>(src);
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] = ToFloat(s[i]) * scale;
  } else {
    const Half* s = src.data<Half>();
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] = HalfToFloat(s[i]) * scale;
  }
}

void ReluBackward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  DispatchFloat(dx.dtype(), "ReluBackward", [&](auto tag) {
    using T = decltype(tag);
    ReluSelect(Elements<T>(y), Elements<T>(dy), Elements<T>(dx), dx.numel());
  });
}

void ConvertLayout(const Tensor& src, Tensor& dst) {
  const int64_t n = src.dim(0), c = src.dim(1), hw = src.dim(2) * src.dim(3);
  // Element (in, k, i) of a [N, C, H*W] tensor, in its format.
  auto index = [&](const Tensor& t, int64_t in, int64_t k, int64_t i) {
    return t.channels_last() ? (in * hw + i) * c + k : (in * c + k) * hw + i;
  };
  DispatchFloat(src.dtype(), "ConvertLayout", [&](auto src_tag) {
    using S = decltype(src_tag);
    DispatchFloat(dst.dtype(), "ConvertLayout", [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* s = Elements<S>(src);
      D* d = Elements<D>(dst);
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in) {
        for (int64_t k = 0; k < c; ++k) {
          for (int64_t i = 0; i < hw; ++i) d[index(dst, in, k, i)] = FromFloat<D>(ToFloat(s[index(src, in, k, i)]));
        }
      }
    });
  });
}

}  // namespace ddp::cpu
