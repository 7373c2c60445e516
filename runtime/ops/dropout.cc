// Dropout (runtime/ops/transformer.h): masks from Philox4x32-10 keyed by
// the seed and the site, with the step and each sample's global index in
// the counter; activations f32 or 16-bit, scaled in f32.
#include <immintrin.h>

#include <algorithm>

#include "runtime/ops/cpu/float_types.h"
#include "runtime/ops/cuda/transformer_cuda.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/transformer.h"
#include "runtime/philox.h"

namespace ddp {
namespace {

constexpr int64_t kParallelThreshold = 1 << 14;

// Forward's x and y, or backward's dy and dx: activations of one dtype and
// shape; `keep` (may be null) a u8 mask of as many elements.
void CheckDropoutOperands(const ExecutionContext& ctx, const char* op, const Tensor& in, const Tensor& out,
                          const Tensor* keep) {
  CheckOnDevice(ctx, op, {&in, &out});
  CheckActivation(ctx, in, op);
  CHECK(out.dtype() == in.dtype() && out.shape() == in.shape())
      << op << ": " << in.DebugString() << " and " << out.DebugString() << " differ";
  if (keep == nullptr) return;
  CheckOnDevice(ctx, op, {keep});
  CHECK(keep->dtype() == DType::kU8 && keep->numel() == in.numel())
      << op << ": the mask must be u8 with " << in.numel() << " elements, got " << keep->DebugString();
}

Philox4x32 DropoutBits(const DropoutKeyWords& k, const DropoutKey& key, int64_t sample, int64_t group) {
  const uint64_t step = static_cast<uint64_t>(key.step);
  return Philox4x32_10(Philox4x32{{static_cast<uint32_t>(group), static_cast<uint32_t>(sample),
                                   static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}},
                       k.k0, k.k1);
}

}  // namespace

DropoutKeyWords DropoutPhiloxKey(const DropoutKey& key) {
  const uint64_t k = SplitMix64(key.seed ^ SplitMix64(static_cast<uint64_t>(key.site)));
  return {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

float DropoutUniform(const DropoutKey& key, int64_t sample, int64_t element) {
  return UniformFromBits(DropoutBits(DropoutPhiloxKey(key), key, sample, element / 4).v[element % 4]);
}

namespace {

// Philox4x32-10 of eight counters at once (AVX2), the counters' words
// c0 (each lane its own) and c1..c3 (shared), under one key: the words of
// each result in out[word][lane], as Philox4x32_10 gives them.
void Philox8(__m256i c0, uint32_t c1, uint32_t c2, uint32_t c3, DropoutKeyWords key, uint32_t out[4][8]) {
  // The low and high halves of a x m for each 32-bit lane of a.
  auto mul_hi_lo = [](__m256i a, uint32_t m, __m256i* lo, __m256i* hi) {
    const __m256i mm = _mm256_set1_epi32(static_cast<int>(m));
    const __m256i even = _mm256_mul_epu32(a, mm), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mm);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  };
  __m256i v0 = c0, v1 = _mm256_set1_epi32(static_cast<int>(c1)), v2 = _mm256_set1_epi32(static_cast<int>(c2)),
          v3 = _mm256_set1_epi32(static_cast<int>(c3));
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    __m256i lo0, hi0, lo1, hi1;
    mul_hi_lo(v0, philox_detail::kMul0, &lo0, &hi0);
    mul_hi_lo(v2, philox_detail::kMul1, &lo1, &hi1);
    v0 = _mm256_xor_si256(_mm256_xor_si256(hi1, v1), _mm256_set1_epi32(static_cast<int>(k0)));
    v1 = lo1;
    v2 = _mm256_xor_si256(_mm256_xor_si256(hi0, v3), _mm256_set1_epi32(static_cast<int>(k1)));
    v3 = lo0;
    k0 += philox_detail::kWeyl0;
    k1 += philox_detail::kWeyl1;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[0]), v0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[1]), v1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[2]), v2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[3]), v3);
}

}  // namespace

void DropoutScales(const DropoutKey& key, float p, int64_t sample, int64_t first, int64_t count, float* scales) {
  const float scale = 1.0f / (1.0f - p);
  if (p == 0.0f) {
    std::fill(scales, scales + count, 1.0f);
    return;
  }
  const DropoutKeyWords k = DropoutPhiloxKey(key);
  const int64_t end = first + count;
  auto set = [&](int64_t e, uint32_t bits) { scales[e - first] = UniformFromBits(bits) >= p ? scale : 0.0f; };
  int64_t e = first;
  // One group at a time up to a group's start, then eight groups of four
  // at a time (the counter's first word is the group, as DropoutBits has
  // it), then one at a time.
  auto one_group = [&] {
    const Philox4x32 bits = DropoutBits(k, key, sample, e / 4);
    for (int64_t lane = e % 4; lane < 4 && e < end; ++lane, ++e) set(e, bits.v[lane]);
  };
  if (e % 4 != 0) one_group();
  const uint64_t step = static_cast<uint64_t>(key.step);
  while (e + 32 <= end) {
    const int64_t g = e / 4;
    const __m256i groups = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(g))),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    uint32_t out[4][8];
    Philox8(groups, static_cast<uint32_t>(sample), static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), k,
            out);
    for (int i = 0; i < 8; ++i) {
      for (int lane = 0; lane < 4; ++lane) set(e + 4 * i + lane, out[lane][i]);
    }
    e += 32;
  }
  while (e < end) one_group();
}

void DropoutForward(ExecutionContext& ctx, const Tensor& x, float p, const DropoutKey& key, int64_t first_sample,
                    Tensor& y, Tensor& keep) {
  CheckDropoutOperands(ctx, "DropoutForward", x, y, keep.defined() ? &keep : nullptr);
  CHECK(p >= 0.0f && p < 1.0f) << "dropout probability " << p << " is outside [0, 1)";
  CHECK(x.ndim() >= 1) << "dropout input " << x.DebugString() << " has no sample dimension";
  const int64_t samples = x.dim(0);
  const int64_t per_sample = samples == 0 ? 0 : x.numel() / samples;
  CHECK_LT(per_sample, int64_t{1} << 34) << "dropout: samples of over 2^34 elements";
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    const DropoutKeyWords k = DropoutPhiloxKey(key);
    return DDP_ON_CUDA("DropoutForward", cuda::DropoutForward(ctx, x, p, k.k0, k.k1, key.step, first_sample, y,
                                                              keep.defined() ? keep.data<uint8_t>() : nullptr));
  }
  // Each sample's factors a chunk at a time (DropoutScales: the draws,
  // eight Philox groups at once), then y = x * factor where kept.
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (per_sample + kChunk - 1) / kChunk;
  uint8_t* mask = keep.defined() ? keep.data<uint8_t>() : nullptr;
  cpu::DispatchFloat(x.dtype(), "DropoutForward", [&](auto tag) {
    using S = decltype(tag);
    const S* in = cpu::Elements<S>(x);
    S* out = cpu::Elements<S>(y);
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() > kParallelThreshold)
    for (int64_t s = 0; s < samples; ++s) {
      for (int64_t c = 0; c < chunks; ++c) {
        float factors[kChunk];
        const int64_t first = c * kChunk, count = std::min(kChunk, per_sample - first);
        DropoutScales(key, p, first_sample + s, first, count, factors);
        const int64_t base = s * per_sample + first;
        for (int64_t e = 0; e < count; ++e) {
          const bool kept = factors[e] != 0.0f;
          if (mask != nullptr) mask[base + e] = kept ? 1 : 0;
          out[base + e] = cpu::FromFloat<S>(kept ? cpu::ToFloat(in[base + e]) * factors[e] : 0.0f);
        }
      }
    }
  });
}

void DropoutBackward(ExecutionContext& ctx, const Tensor& dy, const Tensor& keep, float p, Tensor& dx) {
  CHECK(keep.defined()) << "DropoutBackward without a mask (DropoutForward of dy draws it again)";
  CheckDropoutOperands(ctx, "DropoutBackward", dy, dx, &keep);
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("DropoutBackward", cuda::DropoutBackward(ctx, dy, keep, p, dx));
  const int64_t n = dy.numel();
  const float scale = 1.0f / (1.0f - p);
  cpu::DispatchFloat(dy.dtype(), "DropoutBackward", [&](auto tag) {
    using S = decltype(tag);
    const S* grad = cpu::Elements<S>(dy);
    const uint8_t* mask = keep.data<uint8_t>();
    S* out = cpu::Elements<S>(dx);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = cpu::FromFloat<S>(mask[i] ? cpu::ToFloat(grad[i]) * scale : 0.0f);
  });
}

}  // namespace ddp
