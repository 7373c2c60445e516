#include "runtime/ops/cuda/elementwise_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "runtime/ops/cuda/float16.cuh"

namespace ddp::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops with 64-bit indices: any n launches at most a bounded grid.
template <typename Op>
__global__ void ElementwiseKernel(int64_t n, Op op) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    op(i);
  }
}

template <typename Op>
int Launch(int64_t n, void* stream, Op op) {
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  ElementwiseKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, op);
  return static_cast<int>(cudaGetLastError());
}

// The activation kernels over storage type S (float, __nv_bfloat16, __half),
// computed in f32. Device lambdas cannot live in a generic lambda, so these
// are templates, picked by Typed.
template <typename S>
int AddT(const void* a, const void* b, void* out, int64_t n, void* stream) {
  const S* as = static_cast<const S*>(a);
  const S* bs = static_cast<const S*>(b);
  S* os = static_cast<S*>(out);
  return Launch(n, stream, [=] __device__(int64_t i) { os[i] = FromFloat<S>(ToFloat(as[i]) + ToFloat(bs[i])); });
}

template <typename S>
int ReluForwardT(const void* x, void* y, int64_t n, void* stream) {
  const S* xs = static_cast<const S*>(x);
  S* ys = static_cast<S*>(y);
  return Launch(n, stream, [=] __device__(int64_t i) {
    // NaN stays NaN, as in PyTorch and the CPU path; a select, so exact.
    const float v = ToFloat(xs[i]);
    ys[i] = v > 0.0f || v != v ? xs[i] : FromFloat<S>(0.0f);
  });
}

template <typename S>
int ReluBackwardT(const void* y, const void* dy, void* dx, int64_t n, void* stream) {
  const S* ys = static_cast<const S*>(y);
  const S* dys = static_cast<const S*>(dy);
  S* dxs = static_cast<S*>(dx);
  return Launch(n, stream,
                [=] __device__(int64_t i) { dxs[i] = ToFloat(ys[i]) <= 0.0f ? FromFloat<S>(0.0f) : dys[i]; });
}

template <typename S, typename D>
int ConvertLayoutT(const void* src, bool src_cl, void* dst, bool dst_cl, int64_t n, int64_t c, int64_t hw,
                   void* stream) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  return Launch(n * c * hw, stream, [=] __device__(int64_t i) {
    // Element (in, k, p) of [N, C, HW] at destination index i.
    int64_t in, k, p;
    if (dst_cl) {
      k = i % c;
      p = (i / c) % hw;
      in = i / (c * hw);
    } else {
      p = i % hw;
      k = (i / hw) % c;
      in = i / (c * hw);
    }
    const int64_t from = src_cl ? (in * hw + p) * c + k : (in * c + k) * hw + p;
    d[i] = FromFloat<D>(ToFloat(s[from]));
  });
}

}  // namespace

int ConvertLayout(DType src_dtype, const void* src, bool src_channels_last, DType dst_dtype, void* dst,
                  bool dst_channels_last, int64_t n, int64_t c, int64_t hw, void* stream) {
  int status = 0;
  DispatchFloat(src_dtype, "cuda::ConvertLayout", [&](auto src_tag) {
    DispatchFloat(dst_dtype, "cuda::ConvertLayout", [&](auto dst_tag) {
      status = ConvertLayoutT<decltype(src_tag), decltype(dst_tag)>(src, src_channels_last, dst, dst_channels_last,
                                                                     n, c, hw, stream);
    });
  });
  return status;
}

int Add(DType dtype, const void* a, const void* b, void* out, int64_t n, void* stream) {
  int status = 0;
  DispatchFloat(dtype, "cuda::Add", [&](auto tag) { status = AddT<decltype(tag)>(a, b, out, n, stream); });
  return status;
}

int ReluForward(DType dtype, const void* x, void* y, int64_t n, void* stream) {
  int status = 0;
  DispatchFloat(dtype, "cuda::ReluForward", [&](auto tag) { status = ReluForwardT<decltype(tag)>(x, y, n, stream); });
  return status;
}

int ReluBackward(DType dtype, const void* y, const void* dy, void* dx, int64_t n, void* stream) {
  int status = 0;
  DispatchFloat(dtype, "cuda::ReluBackward",
                [&](auto tag) { status = ReluBackwardT<decltype(tag)>(y, dy, dx, n, stream); });
  return status;
}

int AxpyF32(float alpha, const float* x, float* y, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { y[i] += alpha * x[i]; });
}

int ScaleF32(float alpha, float* x, int64_t n, void* stream) {
  return Launch(n, stream, [=] __device__(int64_t i) { x[i] *= alpha; });
}

int IncrementI64(int64_t* counter, void* stream) {
  return Launch(1, stream, [=] __device__(int64_t) { counter[0] += 1; });
}

int CastF32To16(const float* src, float scale, uint16_t* dst, bool to_bf16, int64_t n, void* stream) {
  if (to_bf16) {
    return Launch(n, stream,
                  [=] __device__(int64_t i) { dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i] * scale)); });
  }
  return Launch(n, stream, [=] __device__(int64_t i) { dst[i] = __half_as_ushort(__float2half_rn(src[i] * scale)); });
}

int Cast16ToF32(const uint16_t* src, float scale, float* dst, bool from_bf16, int64_t n, void* stream) {
  if (from_bf16) {
    return Launch(n, stream,
                  [=] __device__(int64_t i) { dst[i] = __bfloat162float(__ushort_as_bfloat16(src[i])) * scale; });
  }
  return Launch(n, stream, [=] __device__(int64_t i) { dst[i] = __half2float(__ushort_as_half(src[i])) * scale; });
}

}  // namespace ddp::cuda
