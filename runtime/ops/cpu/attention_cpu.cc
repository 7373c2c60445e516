#include "runtime/ops/cpu/attention_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <glog/logging.h>

#include "runtime/ops/cpu/float_types.h"
#include "runtime/ops/cpu/linear_cpu.h"

namespace ddp::cpu {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();

}  // namespace
}  // namespace ddp::cpu

// glibc's vector expf for AVX2 (libmvec), which GCC calls itself only
// under -ffast-math: within 1 ulp of expf.
extern "C" __m256 _ZGVdN8v_expf(__m256 x);

namespace ddp::cpu {
namespace {

// row[j] = exp(row[j] - shift), eight at a time.
void ExpShifted(float* row, int64_t n, float shift) {
  const __m256 by = _mm256_set1_ps(shift);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(row + j, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(row + j), by)));
  for (; j < n; ++j) row[j] = std::exp(row[j] - shift);
}

// One (sample, head) pair's view of the operands: f32 pointers, into the
// tensors (f32) or into the thread's scratch (16-bit, widened once).
struct Pair {
  int64_t sample = 0, head = 0, offset = 0;  // offset: of its [T, d] block
};

template <typename S>
const float* Widened(const Tensor& t, int64_t offset, int64_t count, float* scratch) {
  const S* in = Elements<S>(t) + offset;
  if constexpr (std::is_same_v<S, float>) {
    return in;
  } else {
    for (int64_t i = 0; i < count; ++i) scratch[i] = ToFloat(in[i]);
    return scratch;
  }
}

template <typename S>
void Narrowed(const float* values, int64_t count, Tensor& t, int64_t offset) {
  S* out = Elements<S>(t) + offset;
  if constexpr (std::is_same_v<S, float>) {
    if (out != values) std::copy(values, values + count, out);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = FromFloat<S>(values[i]);
  }
}

// The scores of query rows [i0, i0 + rows) of a pair against every key,
// scaled, with Hugging Face's additive mask (the lowest float where a key
// is padding), in `scores` (rows x t).
void Scores(const FusedAttentionArgs& a, const Pair& pr, int64_t t, int64_t d, float scale, const float* q,
            const float* k, int64_t i0, int64_t rows, float* scores) {
  Gemm(false, true, rows, t, d, scale, q + i0 * d, d, k, d, 0.0f, scores, t);
  if (a.key_mask == nullptr) return;
  const int64_t* mask = a.key_mask + pr.sample * t;
  for (int64_t i = 0; i < rows; ++i) {
    float* row = scores + i * t;
    for (int64_t j = 0; j < t; ++j) row[j] = mask[j] == 0 ? row[j] + kLowest : row[j];
  }
}

// Row i's dropout factors (1 / (1 - p) or 0) in `scales`.
void RowScales(const FusedAttentionArgs& a, const Pair& pr, int64_t t, int64_t i, float* scales) {
  DropoutScales(a.key, a.p, a.first_sample + pr.sample, (pr.head * t + i) * t, t, scales);
}

template <typename S>
void ForwardPair(const FusedAttentionArgs& a, const Pair& pr, int64_t t, int64_t d, const Tensor& q,
                 const Tensor& k, const Tensor& v, float* scratch, Tensor& context, float* lse) {
  constexpr bool kWide = std::is_same_v<S, float>;
  const int64_t block = std::min(kAttentionQueryBlock, t);
  float* scores = scratch;
  float* scales = scores + block * t;
  float* wide = scales + t;  // 16-bit operands: q, k, v widened, and an output block
  const float* qf = Widened<S>(q, pr.offset, t * d, wide);
  const float* kf = Widened<S>(k, pr.offset, t * d, wide + t * d);
  const float* vf = Widened<S>(v, pr.offset, t * d, wide + 2 * t * d);
  float* out_block = wide + 3 * t * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t i0 = 0; i0 < t; i0 += block) {
    const int64_t rows = std::min(block, t - i0);
    Scores(a, pr, t, d, scale, qf, kf, i0, rows, scores);
    for (int64_t i = 0; i < rows; ++i) {
      float* row = scores + i * t;
      float top = kLowest;
      for (int64_t j = 0; j < t; ++j) top = std::max(top, row[j]);
      ExpShifted(row, t, top);
      double sum = 0.0;
      for (int64_t j = 0; j < t; ++j) sum += row[j];
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < t; ++j) row[j] *= inv;
      lse[pr.offset / d + i0 + i] = top + static_cast<float>(std::log(sum));
      if (a.p > 0.0f) {
        RowScales(a, pr, t, i0 + i, scales);
        for (int64_t j = 0; j < t; ++j) row[j] *= scales[j];
      }
    }
    float* out = kWide ? Elements<float>(context) + pr.offset + i0 * d : out_block;
    Gemm(false, false, rows, d, t, 1.0f, scores, t, vf, d, 0.0f, out, d);
    if constexpr (!kWide) Narrowed<S>(out, rows * d, context, pr.offset + i0 * d);
  }
}

// Query rows [i0, i0 + rows): their probabilities again in `probs`, from
// the scores and each row's log-sum-exp (a row whose every key is padding
// has only the lowest float for scores: it attends uniformly, as forward).
void Probabilities(const float* lse, int64_t t, int64_t rows, float* probs) {
  const float uniform = static_cast<float>(1.0 / static_cast<double>(t));
  for (int64_t i = 0; i < rows; ++i) {
    float* row = probs + i * t;
    float top = kLowest;
    for (int64_t j = 0; j < t; ++j) top = std::max(top, row[j]);
    if (top == kLowest) {
      std::fill(row, row + t, uniform);
      continue;
    }
    ExpShifted(row, t, lse[i]);
  }
}

template <typename S>
void BackwardPair(const FusedAttentionArgs& a, const Pair& pr, int64_t t, int64_t d, const Tensor& q,
                  const Tensor& k, const Tensor& v, const float* lse, const Tensor& dcontext, float* scratch,
                  Tensor& dq, Tensor& dk, Tensor& dv) {
  constexpr bool kWide = std::is_same_v<S, float>;
  const int64_t block = std::min(kAttentionQueryBlock, t);
  float* probs = scratch;                 // block x t: P, then dS
  float* work = probs + block * t;        // block x t: P * Z, then dO V^T
  float* scales = work + block * t;       // block x t: Z
  float* dk_acc = scales + block * t;     // t x d
  float* dv_acc = dk_acc + t * d;         // t x d
  float* wide = dv_acc + t * d;           // 16-bit: q, k, v, a dO block and a dQ block
  const float* qf = Widened<S>(q, pr.offset, t * d, wide);
  const float* kf = Widened<S>(k, pr.offset, t * d, wide + t * d);
  const float* vf = Widened<S>(v, pr.offset, t * d, wide + 2 * t * d);
  float* do_block = wide + 3 * t * d;
  float* dq_block = do_block + block * d;
  std::fill(dk_acc, dk_acc + 2 * t * d, 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool dropout = a.p > 0.0f;
  for (int64_t i0 = 0; i0 < t; i0 += block) {
    const int64_t rows = std::min(block, t - i0);
    const float* dof = Widened<S>(dcontext, pr.offset + i0 * d, rows * d, do_block);
    Scores(a, pr, t, d, scale, qf, kf, i0, rows, probs);
    Probabilities(lse + pr.offset / d + i0, t, rows, probs);
    // dV += (P * Z)^T dO.
    const float* dropped = probs;
    if (dropout) {
      for (int64_t i = 0; i < rows; ++i) RowScales(a, pr, t, i0 + i, scales + i * t);
      for (int64_t e = 0; e < rows * t; ++e) work[e] = probs[e] * scales[e];
      dropped = work;
    }
    Gemm(true, false, t, d, rows, 1.0f, dropped, t, dof, d, 1.0f, dv_acc, d);
    // dP = Z * (dO V^T); dS = P * (dP - sum_j P dP), the row sum from the
    // whole row at hand.
    Gemm(false, true, rows, t, d, 1.0f, dof, d, vf, d, 0.0f, work, t);
    for (int64_t i = 0; i < rows; ++i) {
      float* p_row = probs + i * t;
      float* dp_row = work + i * t;
      if (dropout) {
        const float* z = scales + i * t;
        for (int64_t j = 0; j < t; ++j) dp_row[j] *= z[j];
      }
      double dot = 0.0;
      for (int64_t j = 0; j < t; ++j) dot += static_cast<double>(p_row[j]) * dp_row[j];
      const float row_sum = static_cast<float>(dot);
      for (int64_t j = 0; j < t; ++j) p_row[j] *= dp_row[j] - row_sum;
    }
    // dQ = scale dS K; dK += scale dS^T Q.
    float* dq_out = kWide ? Elements<float>(dq) + pr.offset + i0 * d : dq_block;
    Gemm(false, false, rows, d, t, scale, probs, t, kf, d, 0.0f, dq_out, d);
    if constexpr (!kWide) Narrowed<S>(dq_out, rows * d, dq, pr.offset + i0 * d);
    Gemm(true, false, t, d, rows, scale, probs, t, qf + i0 * d, d, 1.0f, dk_acc, d);
  }
  Narrowed<S>(dk_acc, t * d, dk, pr.offset);
  Narrowed<S>(dv_acc, t * d, dv, pr.offset);
}

// Runs `run(pair, scratch)` over every (sample, head) pair on the op
// threads, each with `per_thread` floats of scratch of its own. The
// scratch is the thread's, kept for its next call (one buffer for each of
// forward and backward, f32 and bf16): about 1.2 MiB a thread in bf16 at
// BERT's sizes (seq 384, head 64), outside the tensor allocator, as a
// library's internal buffers are. The pairs are the only parallelism
// (each sgemm runs on its thread alone), so a batch of fewer pairs than
// threads leaves threads idle here.
template <typename Run>
void ForEachPair(const FusedAttentionArgs& a, int64_t pairs, int64_t t, int64_t d, int64_t per_thread, Run&& run) {
  const int64_t heads = pairs / a.samples;
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < pairs; ++r) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < per_thread) scratch.resize(static_cast<size_t>(per_thread));
    run(Pair{r / heads, r % heads, r * t * d}, scratch.data());
  }
}

// f32 scratch a thread needs (forward or backward) for T keys of head
// size d in `dtype`: ForwardPair's and BackwardPair's layouts.
int64_t FusedAttentionScratchFloats(int64_t t, int64_t d, DType dtype, bool backward) {
  const int64_t block = std::min(kAttentionQueryBlock, t);
  const bool wide = dtype == DType::kF32;
  if (!backward) return block * t + t + (wide ? 0 : 3 * t * d + block * d);
  return 3 * block * t + 2 * t * d + (wide ? 0 : 3 * t * d + 2 * block * d);
}

}  // namespace

void FusedAttentionForward(const FusedAttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v,
                           Tensor& context, Tensor& lse) {
  const int64_t pairs = q.dim(0), t = q.dim(1), d = q.dim(2);
  const int64_t per_thread = FusedAttentionScratchFloats(t, d, q.dtype(), /*backward=*/false);
  float* lse_data = lse.data<float>();
  DispatchFloat(q.dtype(), "FusedAttentionForward", [&](auto tag) {
    using S = decltype(tag);
    ForEachPair(args, pairs, t, d, per_thread, [&](const Pair& pr, float* own) {
      ForwardPair<S>(args, pr, t, d, q, k, v, own, context, lse_data);
    });
  });
}

void FusedAttentionBackward(const FusedAttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& lse, const Tensor& dcontext, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t pairs = q.dim(0), t = q.dim(1), d = q.dim(2);
  const int64_t per_thread = FusedAttentionScratchFloats(t, d, q.dtype(), /*backward=*/true);
  const float* lse_data = lse.data<float>();
  DispatchFloat(q.dtype(), "FusedAttentionBackward", [&](auto tag) {
    using S = decltype(tag);
    ForEachPair(args, pairs, t, d, per_thread, [&](const Pair& pr, float* own) {
      BackwardPair<S>(args, pr, t, d, q, k, v, lse_data, dcontext, own, dq, dk, dv);
    });
  });
}

}  // namespace ddp::cpu
