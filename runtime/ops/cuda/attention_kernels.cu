// Launches of the fused attention kernels (attention_kernels.cuh).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "runtime/ops/cuda/attention_cuda.h"
#include "runtime/ops/cuda/attention_kernels.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"

namespace ddp::cuda {
namespace {

using namespace attention_kernels;  // NOLINT: the kernels and their tiles

// The operands the kernels read 16 bytes at a time must start on 16 bytes
// (their rows of 64 elements keep that alignment).
void CheckAligned(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* x : tensors) {
    CHECK(reinterpret_cast<uintptr_t>(x->raw_data()) % 16 == 0)
        << op << " on CUDA reads 16-byte aligned operands, got " << x->DebugString();
  }
}

template <typename S>
Params<S> ParamsOf(const FusedAttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v) {
  return Params<S>{Storage<S>(q),
                   Storage<S>(k),
                   Storage<S>(v),
                   q.dim(1),
                   q.dim(0) / args.samples,
                   args.key_mask,
                   1.0f / std::sqrt(static_cast<float>(kHead)),
                   args.p,
                   args.key0,
                   args.key1,
                   static_cast<uint64_t>(args.step),
                   args.first_sample};
}

// Launches kKernel over (pairs, blocks of kRows rows) with `bytes` of
// shared memory, raising the kernel's limit past the default 48 KiB the
// first time on each device (the attribute is the device's).
template <typename S, auto kKernel, typename... Args>
void Launch(ExecutionContext& ctx, const char* name, int bytes, const Tensor& q, Args... args) {
  static std::atomic<uint64_t> raised{0};  // a bit per device
  const int device = ctx.device().index;
  CHECK(device >= 0 && device < 64) << name << " on CUDA device " << device;
  const uint64_t bit = uint64_t{1} << device;
  if ((raised.load() & bit) == 0) {
    DDP_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    raised.fetch_or(bit);
  }
  const int64_t pairs = q.dim(0), t = q.dim(1);
  const dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>((t + Tiles<S>::kRows - 1) / Tiles<S>::kRows));
  kKernel<<<grid, Tiles<S>::kThreads, bytes, StreamOf(ctx)>>>(args...);
  DDP_CHECK_LAUNCH(name);
}

}  // namespace

void FusedAttentionForward(ExecutionContext& ctx, const FusedAttentionArgs& args, const Tensor& q, const Tensor& k,
                           const Tensor& v, Tensor& context, Tensor& lse) {
  CHECK_EQ(q.dim(2), kFusedAttentionHead) << "fused attention on CUDA takes heads of 64";
  if (q.numel() == 0) return;
  CheckAligned("attention", {&q, &k, &v});
  DispatchFloat(q.dtype(), "cuda::FusedAttentionForward", [&](auto tag) {
    using S = decltype(tag);
    Launch<S, ForwardKernel<S>>(ctx, "attention ForwardKernel", ForwardBytes<S>(), q, ParamsOf<S>(args, q, k, v),
              Storage<S>(context), lse.data<float>());
  });
}

void FusedAttentionBackward(ExecutionContext& ctx, const FusedAttentionArgs& args, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& lse, const Tensor& dcontext, Tensor& row_dot, Tensor& dq,
                            Tensor& dk, Tensor& dv) {
  CHECK_EQ(q.dim(2), kFusedAttentionHead) << "fused attention on CUDA takes heads of 64";
  if (q.numel() == 0) return;
  CheckAligned("attention backward", {&q, &k, &v, &dcontext});
  DispatchFloat(q.dtype(), "cuda::FusedAttentionBackward", [&](auto tag) {
    using S = decltype(tag);
    const Params<S> p = ParamsOf<S>(args, q, k, v);
    Launch<S, QueryBackwardKernel<S>>(ctx, "attention QueryBackwardKernel", QueryBackwardBytes<S>(), q, p,
              lse.data<float>(), static_cast<const S*>(Storage<S>(dcontext)), Storage<S>(dq), row_dot.data<float>());
    Launch<S, KeyBackwardKernel<S>>(ctx, "attention KeyBackwardKernel", KeyBackwardBytes<S>(), q, p,
              lse.data<float>(), static_cast<const float*>(row_dot.data<float>()),
              static_cast<const S*>(Storage<S>(dcontext)), Storage<S>(dk), Storage<S>(dv));
  });
}

}  // namespace ddp::cuda
