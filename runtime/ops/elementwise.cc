#include "runtime/ops/elementwise.h"

#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/cpu/elementwise_cpu.h"
#include "runtime/ops/cuda/elementwise_kernels.h"
#include "runtime/ops/op_checks.h"

namespace ddp {
namespace {

// Every tensor must have `first`'s shape and dtype and sit on the context's
// device; `activations` (Add, ReLU) allows what CheckActivation does, the
// gradient arithmetic takes f32.
void CheckOperands(const ExecutionContext& ctx, const char* op, std::initializer_list<const Tensor*> tensors,
                   bool activations = false) {
  const Tensor& first = **tensors.begin();
  for (const Tensor* t : tensors) {
    CHECK(t->defined()) << op << ": undefined operand";
    CHECK(t->shape() == first.shape() && t->dtype() == first.dtype() && t->format() == first.format())
        << op << ": " << t->DebugString() << " vs " << first.DebugString();
  }
  if (activations) {
    CheckActivation(ctx, first, op, /*cuda_channels_last=*/true);  // elementwise: any layout, all alike
  } else {
    CheckF32(first, op);
  }
  CheckOnDevice(ctx, op, tensors);
}

// Runs the CUDA kernel `launch` (which returns a cudaError_t) or the CPU loop.
template <typename CudaLaunch, typename CpuRun>
void Dispatch(ExecutionContext& ctx, const char* op, CudaLaunch launch, CpuRun run) {
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
#ifdef DDP_HAVE_CUDA
    ::ddp::cuda::Check(launch(), op, __FILE__, __LINE__);
#else
    LOG(FATAL) << op << " on " << ctx.device().ToString() << ": this binary was built without CUDA";
#endif
    return;
  }
  run();
}

}  // namespace

void Add(ExecutionContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  CheckOperands(ctx, "Add", {&a, &b, &out}, /*activations=*/true);
  Dispatch(
      ctx, "cuda::Add",
      [&] { return cuda::Add(out.dtype(), a.raw_data(), b.raw_data(), out.raw_data(), out.numel(), ctx.cuda_stream()); },
      [&] { cpu::Add(a, b, out); });
}

void Axpy(ExecutionContext& ctx, float alpha, const Tensor& x, Tensor& y) {
  CheckOperands(ctx, "Axpy", {&x, &y});
  Dispatch(
      ctx, "cuda::AxpyF32",
      [&] { return cuda::AxpyF32(alpha, x.data<float>(), y.data<float>(), y.numel(), ctx.cuda_stream()); },
      [&] { cpu::Axpy(alpha, x.data<float>(), y.data<float>(), y.numel()); });
}

void Scale(ExecutionContext& ctx, float alpha, Tensor& x) {
  CheckOperands(ctx, "Scale", {&x});
  Dispatch(
      ctx, "cuda::ScaleF32", [&] { return cuda::ScaleF32(alpha, x.data<float>(), x.numel(), ctx.cuda_stream()); },
      [&] { cpu::Scale(alpha, x.data<float>(), x.numel()); });
}

void ReluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  CheckOperands(ctx, "ReluForward", {&x, &y}, /*activations=*/true);
  Dispatch(
      ctx, "cuda::ReluForward",
      [&] { return cuda::ReluForward(y.dtype(), x.raw_data(), y.raw_data(), y.numel(), ctx.cuda_stream()); },
      [&] { cpu::ReluForward(x, y); });
}

void ReluBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  CheckOperands(ctx, "ReluBackward", {&y, &dy, &dx}, /*activations=*/true);
  Dispatch(
      ctx, "cuda::ReluBackward",
      [&] {
        return cuda::ReluBackward(dx.dtype(), y.raw_data(), dy.raw_data(), dx.raw_data(), dx.numel(),
                                  ctx.cuda_stream());
      },
      [&] { cpu::ReluBackward(y, dy, dx); });
}

void Copy(ExecutionContext& ctx, const Tensor& src, Tensor& dst) {
  CHECK(src.numel() == dst.numel() && src.dtype() == dst.dtype())
      << "Copy " << src.DebugString() << " into " << dst.DebugString();
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("Copy", cuda::CopyTensorAsync(src, dst, ctx.cuda_stream()));
  }
  dst.CopyFrom(src);
}

void Increment(ExecutionContext& ctx, Tensor& counter) {
  CHECK(counter.dtype() == DType::kI64 && counter.numel() == 1) << "Increment of " << counter.DebugString();
  CheckOnDevice(ctx, "Increment", {&counter});
  Dispatch(
      ctx, "cuda::IncrementI64", [&] { return cuda::IncrementI64(counter.data<int64_t>(), ctx.cuda_stream()); },
      [&] { counter.data<int64_t>()[0] += 1; });
}

void CastScaled(ExecutionContext& ctx, const Tensor& src, float scale, Tensor& dst) {
  CHECK(src.numel() == dst.numel()) << "CastScaled " << src.DebugString() << " into " << dst.DebugString();
  const bool narrowing = src.dtype() == DType::kF32;
  const DType half = narrowing ? dst.dtype() : src.dtype();
  CHECK((narrowing || dst.dtype() == DType::kF32) && (half == DType::kBF16 || half == DType::kF16))
      << "CastScaled goes between f32 and bf16 or f16, not " << src.DebugString() << " -> " << dst.DebugString();
  CheckOnDevice(ctx, "CastScaled", {&src, &dst});
  const bool bf16 = half == DType::kBF16;
  Dispatch(
      ctx, "cuda::CastScaled",
      [&] {
        return narrowing ? cuda::CastF32To16(src.data<float>(), scale, static_cast<uint16_t*>(dst.raw_data()), bf16,
                                             src.numel(), ctx.cuda_stream())
                         : cuda::Cast16ToF32(static_cast<const uint16_t*>(src.raw_data()), scale, dst.data<float>(),
                                             bf16, src.numel(), ctx.cuda_stream());
      },
      [&] { cpu::CastScaled(src, scale, dst); });
}

void ConvertLayout(ExecutionContext& ctx, const Tensor& src, Tensor& dst) {
  CHECK(src.shape() == dst.shape() && src.ndim() == 4) << "ConvertLayout " << src.DebugString() << " into "
                                                       << dst.DebugString();
  CheckActivation(ctx, src, "ConvertLayout source", /*cuda_channels_last=*/true);
  CheckActivation(ctx, dst, "ConvertLayout destination", /*cuda_channels_last=*/true);
  CheckOnDevice(ctx, "ConvertLayout", {&src, &dst});
  Dispatch(
      ctx, "cuda::ConvertLayout",
      [&] {
        return cuda::ConvertLayout(src.dtype(), src.raw_data(), src.channels_last(), dst.dtype(), dst.raw_data(),
                                   dst.channels_last(), src.dim(0), src.dim(1), src.dim(2) * src.dim(3),
                                   ctx.cuda_stream());
      },
      [&] { cpu::ConvertLayout(src, dst); });
}

}  // namespace ddp
