// Argument checks shared by the op front ends. A failure here is a bug in
// the caller (layers build op arguments), so it is a CHECK naming the op.
#pragma once

#include <initializer_list>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

inline void CheckOnCpu(const ExecutionContext& ctx, const char* op) {
  CHECK(ctx.device().is_cpu()) << op << " has no kernel for " << ctx.device().ToString() << " yet";
}

// Every tensor is on the context's device.
inline void CheckOnDevice(const ExecutionContext& ctx, const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    CHECK(t->device() == ctx.device()) << op << ": " << t->DebugString() << " on a " << ctx.device().ToString()
                                       << " context";
  }
}

// A meta context (--device meta) runs no kernel: an op returns after its
// checks, once its outputs exist (they were allocated by the caller).
inline bool OnMeta(const ExecutionContext& ctx) { return ctx.device().is_meta(); }

template <typename T>
T NoCudaInThisBuild(const char* op) {
  LOG(FATAL) << op << ": this binary was built without CUDA (no nvcc at build time)";
  return T();
}

// DDP_ON_CUDA("Op", cuda::Op(...)) evaluates to the CUDA implementation's
// call in builds with CUDA; without it the call is never compiled in (it
// sits in decltype) and running it is fatal. Use it as
//   if (ctx.device().is_cuda()) return DDP_ON_CUDA("Op", cuda::Op(ctx, ...));
#ifdef DDP_HAVE_CUDA
#define DDP_ON_CUDA(op, call) (call)
#else
#define DDP_ON_CUDA(op, call) (::ddp::NoCudaInThisBuild<decltype(call)>(op))
#endif

inline void CheckF32(const Tensor& t, const char* what) {
  CHECK(t.defined()) << what << " is undefined";
  CHECK(t.dtype() == DType::kF32) << what << " must be f32, got " << t.DebugString();
}

// Activations and their gradients: f32 on any device; for mixed precision
// bf16 on the CPU, bf16 or f16 on CUDA. Channels-last on CUDA only for ops
// whose CUDA kernels take it (`cuda_channels_last`).
inline void CheckActivation(const ExecutionContext& ctx, const Tensor& t, const char* what,
                            bool cuda_channels_last = false) {
  CHECK(t.defined()) << what << " is undefined";
  const DType d = t.dtype();
  // The meta device takes what the device it plans for would.
  const bool ok = d == DType::kF32 || d == DType::kBF16 || (d == DType::kF16 && !ctx.device().is_cpu());
  CHECK(ok) << what << " on " << ctx.device().ToString() << " must be f32 or bf16"
            << (ctx.device().is_cuda() ? " or f16" : "") << ", got " << t.DebugString();
  CHECK(!(t.channels_last() && ctx.device().is_cuda() && !cuda_channels_last))
      << what << ": channels-last on CUDA is not in this build yet, got " << t.DebugString();
}

// Activations an op reads and writes together share one memory format.
inline void CheckSameFormat(const Tensor& a, const Tensor& b, const char* what) {
  CHECK(a.format() == b.format()) << what << ": " << a.DebugString() << " and " << b.DebugString()
                                  << " differ in memory format";
}

inline void CheckSameShape(const Tensor& expected, const Tensor& t, const char* what) {
  CHECK(t.defined()) << what << " is undefined";
  CHECK(t.shape() == expected.shape()) << what << " " << t.DebugString() << " must have shape "
                                       << ShapeToString(expected.shape());
}

}  // namespace ddp
