// Fused attention kernels (runtime/ops/cuda/attention_cuda.h), launched by
// attention_kernels.cu. Each block
// owns 16 rows per warp of one (sample, head) pair (query rows in forward
// and in the dQ kernel, keys in the dK/dV kernel) and walks the other side
// in tiles of 64, staged in shared memory. A warp's 16 x 64 products are
// WarpTiles: WMMA fragments for 16-bit operands, one row and 32 columns a
// lane for f32. Elementwise work (masking, softmax, dropout, dS) reads and
// writes the products through shared memory in f32.
#pragma once

#ifdef __CUDACC__
#include <mma.h>
#endif

#include <cfloat>
#include <cstdint>
#include <cmath>
#include <type_traits>

#include "runtime/ops/cuda/attention_cuda.h"
#include "runtime/ops/cuda/float16.cuh"
#include "runtime/philox.h"

namespace ddp::cuda::attention_kernels {

constexpr int kHead = static_cast<int>(kFusedAttentionHead);
constexpr int kTile = 64;        // keys (forward, dQ) or queries (dK, dV) a step
constexpr int kLdF = kTile + 4;  // f32 tiles' row stride (kTile == kHead)
constexpr float kLowest = -FLT_MAX;
constexpr unsigned kAllLanes = 0xffffffffu;
static_assert(kTile == kHead, "the f32 tiles hold scores and head rows alike");

template <typename S>
struct Tiles {
  static constexpr bool kTensorCores = !std::is_same_v<S, float>;
  static constexpr int kWarps = kTensorCores ? 4 : 2;  // f32 tiles are twice the bytes
  static constexpr int kRows = 16 * kWarps;            // rows a block owns
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = kHead + (kTensorCores ? 8 : 4);  // operand tiles' row stride
};

template <typename S>
struct Params {
  const S *q, *k, *v;
  int64_t t, heads;
  const int64_t* key_mask;
  float scale, p;
  uint32_t key0, key1;
  uint64_t step;
  int64_t first_sample;
};

// The lane's row among its warp's 16 and the first of its 32 columns, for
// elementwise work on a warp's 16 x 64 tile (and the f32 WarpTile's layout).
__device__ __forceinline__ int LaneRow() { return (threadIdx.x & 31) >> 1; }
__device__ __forceinline__ int LaneCol() { return (threadIdx.x & 1) * 32; }

// A warp's 16 x 64 f32 product.
template <typename S, bool kTensorCores = Tiles<S>::kTensorCores>
struct WarpTile;

#ifdef __CUDACC__
namespace wmma = nvcuda::wmma;

template <typename S>
struct WarpTile<S, true> {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f[4];

  __device__ void Zero() {
#pragma unroll
    for (int n = 0; n < 4; ++n) wmma::fill_fragment(f[n], 0.0f);
  }
  // += A B: A 16 x 64 at a (row stride lda); B 64 x 64 at b, element (k, n)
  // at b[k * ldb + n], or with kBT at b[n * ldb + k] (B stored transposed).
  template <bool kBT>
  __device__ void Mma(const S* a, int lda, const S* b, int ldb) {
    using LayoutB = std::conditional_t<kBT, wmma::col_major, wmma::row_major>;
#pragma unroll
    for (int kf = 0; kf < 4; ++kf) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, S, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, a + 16 * kf, lda);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, S, LayoutB> fb;
        wmma::load_matrix_sync(fb, kBT ? b + 16 * n * ldb + 16 * kf : b + 16 * kf * ldb + 16 * n, ldb);
        wmma::mma_sync(f[n], fa, fb, f[n]);
      }
    }
  }
  __device__ void Store(float* out, int ld) const {
#pragma unroll
    for (int n = 0; n < 4; ++n) wmma::store_matrix_sync(out + 16 * n, f[n], ld, wmma::mem_row_major);
  }
  __device__ void Load(const float* in, int ld) {
#pragma unroll
    for (int n = 0; n < 4; ++n) wmma::load_matrix_sync(f[n], in + 16 * n, ld, wmma::mem_row_major);
  }
};

#endif  // __CUDACC__

template <>
struct WarpTile<float, false> {
  float v[32];

  __device__ void Zero() {
#pragma unroll
    for (int c = 0; c < 32; ++c) v[c] = 0.0f;
  }
  template <bool kBT>
  __device__ void Mma(const float* a, int lda, const float* b, int ldb) {
    const int r = LaneRow(), c0 = LaneCol();
    for (int k = 0; k < 64; ++k) {
      const float x = a[r * lda + k];
#pragma unroll
      for (int c = 0; c < 32; ++c) v[c] = fmaf(x, kBT ? b[(c0 + c) * ldb + k] : b[k * ldb + c0 + c], v[c]);
    }
  }
  __device__ void Store(float* out, int ld) const {
    const int r = LaneRow(), c0 = LaneCol();
#pragma unroll
    for (int c = 0; c < 32; ++c) out[r * ld + c0 + c] = v[c];
  }
  __device__ void Load(const float* in, int ld) {
    const int r = LaneRow(), c0 = LaneCol();
#pragma unroll
    for (int c = 0; c < 32; ++c) v[c] = in[r * ld + c0 + c];
  }
};

// Rows [row0, row0 + rows) of a pair's [t, 64] block into shared memory
// (row stride ld), zeros past row t; 16 bytes a thread at a time.
template <typename S>
__device__ void LoadRows(const S* src, int64_t row0, int64_t t, int rows, S* dst, int ld) {
  constexpr int kVec = 16 / sizeof(S), kPerRow = kHead / kVec;
  for (int e = threadIdx.x; e < rows * kPerRow; e += blockDim.x) {
    const int r = e / kPerRow, c = (e % kPerRow) * kVec;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (row0 + r < t) x = *reinterpret_cast<const uint4*>(src + (row0 + r) * kHead + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = x;
  }
}

// The scaled score with Hugging Face's additive mask (the lowest float
// where key j is padding), as the CPU op makes it.
__device__ __forceinline__ float MaskedScore(float product, float scale, const int64_t* mask, int64_t j) {
  const float s = product * scale;
  return mask != nullptr && mask[j] == 0 ? s + kLowest : s;
}

// A probability again from its score and its row's log-sum-exp. A row
// whose every key is padding has the lowest float for every score and for
// its log-sum-exp: it attends uniformly, as forward made it.
__device__ __forceinline__ float Probability(float s, float lse, float uniform) {
  return lse == kLowest ? uniform : expf(s - lse);
}

// The dropout factors (1 / (1 - p) or 0) of one sample's elements, as
// DropoutScales draws them; a lane keeps its last Philox group, so a run
// of consecutive elements costs one draw per four.
class DropoutDraws {
 public:
  template <typename S>
  __device__ DropoutDraws(const Params<S>& a, int64_t sample)
      : p_(a.p), keep_(1.0f / (1.0f - a.p)), key0_(a.key0), key1_(a.key1),
        sample_(static_cast<uint32_t>(a.first_sample + sample)), step_(a.step) {}

  __device__ float Factor(int64_t e) {
    if (p_ == 0.0f) return 1.0f;
    const int64_t g = e >> 2;
    if (g != group_) {
      group_ = g;
      bits_ = Philox4x32_10(Philox4x32{{static_cast<uint32_t>(g), sample_, static_cast<uint32_t>(step_),
                                        static_cast<uint32_t>(step_ >> 32)}},
                            key0_, key1_);
    }
    // Selected, not indexed, so the words stay in registers.
    const int64_t lane = e & 3;
    const uint32_t bits = lane == 0 ? bits_.v[0] : lane == 1 ? bits_.v[1] : lane == 2 ? bits_.v[2] : bits_.v[3];
    return UniformFromBits(bits) >= p_ ? keep_ : 0.0f;
  }

 private:
  float p_, keep_;
  uint32_t key0_, key1_, sample_;
  uint64_t step_;
  int64_t group_ = -1;
  Philox4x32 bits_{{0, 0, 0, 0}};
};

// The pair this block works on and where its [t, 64] blocks start.
struct Pair {
  int64_t index, sample, head, base;
};

// Where a block of kRows rows and its lane stand: the pair, the sequence
// length, the block's first row, the lane's warp, its row r among the
// block's (row0 + r the query or key) and first of its 32 columns, and
// the sample's key mask (null: none).
struct Place {
  Pair pr;
  int64_t t, row0;
  int warp, r, c0;
  int64_t i;
  const int64_t* mask;
};

template <typename S>
__device__ Place PlaceOf(const Params<S>& a) {
  const int64_t index = blockIdx.x, t = a.t, row0 = static_cast<int64_t>(blockIdx.y) * Tiles<S>::kRows;
  const Pair pr{index, index / a.heads, index % a.heads, index * t * kHead};
  const int warp = threadIdx.x >> 5, r = warp * 16 + LaneRow();
  return {pr, t, row0, warp, r, LaneCol(), row0 + r, a.key_mask != nullptr ? a.key_mask + pr.sample * t : nullptr};
}

// Shared memory, in bytes, of each kernel for storage type S.
template <typename S>
constexpr int ForwardBytes() {
  using T = Tiles<S>;
  return (T::kRows + 2 * kTile) * T::kLd * sizeof(S) + 2 * T::kRows * kLdF * sizeof(float) +
         (T::kTensorCores ? T::kRows * T::kLd * sizeof(S) : 0);
}
template <typename S>
constexpr int QueryBackwardBytes() {
  using T = Tiles<S>;
  return (2 * T::kRows + 2 * kTile) * T::kLd * sizeof(S) + 2 * T::kRows * kLdF * sizeof(float) +
         (T::kTensorCores ? T::kRows * T::kLd * sizeof(S) : 0);
}
template <typename S>
constexpr int KeyBackwardBytes() {
  using T = Tiles<S>;
  return (2 * T::kRows + 2 * kTile) * T::kLd * sizeof(S) + 2 * T::kRows * kLdF * sizeof(float) +
         (T::kTensorCores ? 2 * T::kRows * T::kLd * sizeof(S) : 0) + 2 * kTile * sizeof(float);
}

// The tile of keys and values from key0 into ks and vs (once every warp
// is done with the last), then the warp's 16 rows of Q K^T, unscaled, from
// its rows of Q (qw) into swarp.
template <typename S>
__device__ void NextKeyTile(const Params<S>& a, const Pair& pr, int64_t key0, S* ks, S* vs, const S* qw,
                            float* swarp) {
  using T = Tiles<S>;
  __syncthreads();
  LoadRows(a.k + pr.base, key0, a.t, kTile, ks, T::kLd);
  LoadRows(a.v + pr.base, key0, a.t, kTile, vs, T::kLd);
  __syncthreads();
  WarpTile<S> acc;
  acc.Zero();
  acc.template Mma<true>(qw, T::kLd, ks, T::kLd);
  acc.Store(swarp, kLdF);
}

// Forward: a block of query rows against every key, online softmax.
template <typename S>
__global__ void __launch_bounds__(Tiles<S>::kThreads)
    ForwardKernel(Params<S> a, S* context, float* lse) {
  using T = Tiles<S>;
  extern __shared__ __align__(128) unsigned char smem[];
  S* qs = reinterpret_cast<S*>(smem);                          // kRows x kLd
  S* ks = qs + T::kRows * T::kLd;                              // kTile x kLd
  S* vs = ks + kTile * T::kLd;                                 // kTile x kLd
  float* ss = reinterpret_cast<float*>(vs + kTile * T::kLd);   // kRows x kLdF: scores (f32: then P)
  float* os = ss + T::kRows * kLdF;                            // kRows x kLdF: the output's sums
  S* ps = reinterpret_cast<S*>(os + T::kRows * kLdF);          // kRows x kLd: 16-bit P
  const auto [pr, t, row0, warp, r, c0, i, mask] = PlaceOf(a);
  LoadRows(a.q + pr.base, row0, t, T::kRows, qs, T::kLd);
  for (int e = threadIdx.x; e < T::kRows * kLdF; e += blockDim.x) os[e] = 0.0f;
  float* srow = ss + r * kLdF + c0;
  float* orow = os + r * kLdF + c0;
  float* swarp = ss + warp * 16 * kLdF;
  float* owarp = os + warp * 16 * kLdF;
  DropoutDraws draws(a, pr.sample);
  float m = -INFINITY, l = 0.0f;
  for (int64_t key0 = 0; key0 < t; key0 += kTile) {
    NextKeyTile(a, pr, key0, ks, vs, qs + warp * 16 * T::kLd, swarp);
    __syncwarp();
    float top = -INFINITY;
    for (int c = 0; c < 32; ++c) {
      const int64_t j = key0 + c0 + c;
      const float s = j < t ? MaskedScore(srow[c], a.scale, mask, j) : -INFINITY;
      srow[c] = s;
      top = fmaxf(top, s);
    }
    top = fmaxf(top, __shfl_xor_sync(kAllLanes, top, 1));
    const float m_new = fmaxf(m, top);  // finite: a tile holds at least one key
    const float alpha = expf(m - m_new);
    float sum = 0.0f;
    for (int c = 0; c < 32; ++c) {
      const int64_t j = key0 + c0 + c;
      const float e = expf(srow[c] - m_new);
      sum += e;
      const float z = j < t ? draws.Factor((pr.head * t + i) * t + j) : 0.0f;
      if constexpr (T::kTensorCores) {
        ps[r * T::kLd + c0 + c] = FromFloat<S>(e * z);
      } else {
        srow[c] = e * z;
      }
      orow[c] *= alpha;
    }
    sum += __shfl_xor_sync(kAllLanes, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    __syncwarp();
    WarpTile<S> acc;
    acc.Load(owarp, kLdF);
    if constexpr (T::kTensorCores) {
      acc.template Mma<false>(ps + warp * 16 * T::kLd, T::kLd, vs, T::kLd);
    } else {
      acc.template Mma<false>(swarp, kLdF, vs, T::kLd);
    }
    acc.Store(owarp, kLdF);
    __syncwarp();
  }
  if (i >= t) return;
  const float inv = 1.0f / l;
  S* out = context + pr.base + i * kHead + c0;
  for (int c = 0; c < 32; ++c) out[c] = FromFloat<S>(orow[c] * inv);
  if (c0 == 0) lse[pr.index * t + i] = m + logf(l);
}

// Backward, a block of query rows against every key, twice: first the row
// sums D = sum_j P Z dP' (dP' = dO V^T, Z the dropout factors), which equal
// rowsum(dO * O), then dQ = scale * dS K with dS = P (Z dP' - D).
template <typename S>
__global__ void __launch_bounds__(Tiles<S>::kThreads)
    QueryBackwardKernel(Params<S> a, const float* lse, const S* dcontext, S* dq, float* row_dot) {
  using T = Tiles<S>;
  extern __shared__ __align__(128) unsigned char smem[];
  S* qs = reinterpret_cast<S*>(smem);                          // kRows x kLd
  S* dos = qs + T::kRows * T::kLd;                             // kRows x kLd
  S* ks = dos + T::kRows * T::kLd;                             // kTile x kLd
  S* vs = ks + kTile * T::kLd;                                 // kTile x kLd
  float* ss = reinterpret_cast<float*>(vs + kTile * T::kLd);   // kRows x kLdF: scores (f32: then dS)
  float* dps = ss + T::kRows * kLdF;                           // kRows x kLdF: dP'
  S* dss = reinterpret_cast<S*>(dps + T::kRows * kLdF);        // kRows x kLd: 16-bit dS
  const auto [pr, t, row0, warp, r, c0, i, mask] = PlaceOf(a);
  LoadRows(a.q + pr.base, row0, t, T::kRows, qs, T::kLd);
  LoadRows(dcontext + pr.base, row0, t, T::kRows, dos, T::kLd);
  const float row_lse = i < t ? lse[pr.index * t + i] : 0.0f;
  const float uniform = 1.0f / static_cast<float>(t);
  float* srow = ss + r * kLdF + c0;
  float* dprow = dps + r * kLdF + c0;
  float* swarp = ss + warp * 16 * kLdF;
  DropoutDraws draws(a, pr.sample);
  WarpTile<S> dq_acc;
  dq_acc.Zero();
  float dot = 0.0f;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t key0 = 0; key0 < t; key0 += kTile) {
      NextKeyTile(a, pr, key0, ks, vs, qs + warp * 16 * T::kLd, swarp);
      WarpTile<S> acc;  // dP' = dO V^T
      acc.Zero();
      acc.template Mma<true>(dos + warp * 16 * T::kLd, T::kLd, vs, T::kLd);
      acc.Store(dps + warp * 16 * kLdF, kLdF);
      __syncwarp();
      for (int c = 0; c < 32; ++c) {
        const int64_t j = key0 + c0 + c;
        float ds = 0.0f;
        if (j < t) {
          const float p = Probability(MaskedScore(srow[c], a.scale, mask, j), row_lse, uniform);
          const float dp = draws.Factor((pr.head * t + i) * t + j) * dprow[c];
          if (pass == 0) dot += p * dp;
          ds = p * (dp - dot);
        }
        if (pass == 0) continue;
        if constexpr (T::kTensorCores) {
          dss[r * T::kLd + c0 + c] = FromFloat<S>(ds);
        } else {
          srow[c] = ds;
        }
      }
      if (pass == 0) continue;
      __syncwarp();
      if constexpr (T::kTensorCores) {
        dq_acc.template Mma<false>(dss + warp * 16 * T::kLd, T::kLd, ks, T::kLd);
      } else {
        dq_acc.template Mma<false>(swarp, kLdF, ks, T::kLd);
      }
    }
    if (pass == 0) dot += __shfl_xor_sync(kAllLanes, dot, 1);
  }
  __syncwarp();
  dq_acc.Store(swarp, kLdF);
  __syncwarp();
  if (i >= t) return;
  S* out = dq + pr.base + i * kHead + c0;
  for (int c = 0; c < 32; ++c) out[c] = FromFloat<S>(a.scale * srow[c]);
  if (c0 == 0) row_dot[pr.index * t + i] = dot;
}

// Backward, a block of keys against every query: dV = (P Z)^T dO and
// dK = scale * dS^T Q, from the transposed products S^T = K Q^T and
// dP'^T = V dO^T. A lane's elements are two queries by the warp's 16 keys,
// consecutive keys of one row of the mask (one Philox draw per four).
template <typename S>
__global__ void __launch_bounds__(Tiles<S>::kThreads)
    KeyBackwardKernel(Params<S> a, const float* lse, const float* row_dot, const S* dcontext, S* dk, S* dv) {
  using T = Tiles<S>;
  extern __shared__ __align__(128) unsigned char smem[];
  S* ks = reinterpret_cast<S*>(smem);                          // kRows x kLd
  S* vs = ks + T::kRows * T::kLd;                              // kRows x kLd
  S* qs = vs + T::kRows * T::kLd;                              // kTile x kLd
  S* dos = qs + kTile * T::kLd;                                // kTile x kLd
  float* sts = reinterpret_cast<float*>(dos + kTile * T::kLd);  // kRows x kLdF: S^T (f32: then P Z)
  float* dpts = sts + T::kRows * kLdF;                          // kRows x kLdF: dP'^T (f32: then dS^T)
  S* pzs = reinterpret_cast<S*>(dpts + T::kRows * kLdF);        // kRows x kLd: 16-bit (P Z)^T
  S* dsts = pzs + (T::kTensorCores ? T::kRows * T::kLd : 0);    // kRows x kLd: 16-bit dS^T
  float* lse_s = reinterpret_cast<float*>(dsts + (T::kTensorCores ? T::kRows * T::kLd : 0));  // kTile
  float* dot_s = lse_s + kTile;                                                                // kTile
  const auto [pr, t, row0, warp, r, c0, j, mask] = PlaceOf(a);  // r, j: the lane's key at the end
  const int lane = threadIdx.x & 31;
  LoadRows(a.k + pr.base, row0, t, T::kRows, ks, T::kLd);
  LoadRows(a.v + pr.base, row0, t, T::kRows, vs, T::kLd);
  const float uniform = 1.0f / static_cast<float>(t);
  float* stw = sts + warp * 16 * kLdF;
  float* dptw = dpts + warp * 16 * kLdF;
  DropoutDraws draws(a, pr.sample);
  WarpTile<S> dk_acc, dv_acc;
  dk_acc.Zero();
  dv_acc.Zero();
  for (int64_t q0 = 0; q0 < t; q0 += kTile) {
    __syncthreads();
    LoadRows(a.q + pr.base, q0, t, kTile, qs, T::kLd);
    LoadRows(dcontext + pr.base, q0, t, kTile, dos, T::kLd);
    for (int x = threadIdx.x; x < kTile; x += blockDim.x) {
      const int64_t i = q0 + x;
      lse_s[x] = i < t ? lse[pr.index * t + i] : 0.0f;
      dot_s[x] = i < t ? row_dot[pr.index * t + i] : 0.0f;
    }
    __syncthreads();
    WarpTile<S> acc;
    acc.Zero();
    acc.template Mma<true>(ks + warp * 16 * T::kLd, T::kLd, qs, T::kLd);
    acc.Store(stw, kLdF);
    acc.Zero();
    acc.template Mma<true>(vs + warp * 16 * T::kLd, T::kLd, dos, T::kLd);
    acc.Store(dptw, kLdF);
    __syncwarp();
    for (int half = 0; half < 2; ++half) {
      const int x = lane + 32 * half;
      const int64_t i = q0 + x;
      for (int jj = 0; jj < 16; ++jj) {
        const int at = (warp * 16 + jj) * kLdF + x;
        const int64_t key = row0 + warp * 16 + jj;
        float pz = 0.0f, ds = 0.0f;
        if (i < t && key < t) {
          const float p = Probability(MaskedScore(sts[at], a.scale, mask, key), lse_s[x], uniform);
          const float z = draws.Factor((pr.head * t + i) * t + key);
          pz = p * z;
          ds = p * (z * dpts[at] - dot_s[x]);
        }
        if constexpr (T::kTensorCores) {
          pzs[(warp * 16 + jj) * T::kLd + x] = FromFloat<S>(pz);
          dsts[(warp * 16 + jj) * T::kLd + x] = FromFloat<S>(ds);
        } else {
          sts[at] = pz;
          dpts[at] = ds;
        }
      }
    }
    __syncwarp();
    if constexpr (T::kTensorCores) {
      dv_acc.template Mma<false>(pzs + warp * 16 * T::kLd, T::kLd, dos, T::kLd);
      dk_acc.template Mma<false>(dsts + warp * 16 * T::kLd, T::kLd, qs, T::kLd);
    } else {
      dv_acc.template Mma<false>(stw, kLdF, dos, T::kLd);
      dk_acc.template Mma<false>(dptw, kLdF, qs, T::kLd);
    }
  }
  // Each lane writes its row's 32 columns of dV, then of dK.
  const float* row = sts + r * kLdF + c0;
  __syncwarp();
  dv_acc.Store(stw, kLdF);
  __syncwarp();
  if (j < t) {
    for (int c = 0; c < 32; ++c) dv[pr.base + j * kHead + c0 + c] = FromFloat<S>(row[c]);
  }
  __syncwarp();
  dk_acc.Store(stw, kLdF);
  __syncwarp();
  if (j < t) {
    for (int c = 0; c < 32; ++c) dk[pr.base + j * kHead + c0 + c] = FromFloat<S>(a.scale * row[c]);
  }
}

}  // namespace ddp::cuda::attention_kernels
