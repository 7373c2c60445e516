#include "runtime/ops/pooling.h"

#include "runtime/ops/cpu/pooling_cpu.h"
#include "runtime/ops/cuda/pooling_cuda.h"
#include "runtime/ops/op_checks.h"

namespace ddp {

Shape Pool2dOutputShape(const Shape& x, const Pool2dParams& p) {
  CHECK_EQ(x.size(), 4u) << "pooling input must be NCHW, got " << ShapeToString(x);
  CHECK(p.kernel_h >= 1 && p.kernel_w >= 1 && p.stride_h >= 1 && p.stride_w >= 1) << "pooling kernel and stride";
  CHECK(p.pad_h >= 0 && p.pad_w >= 0 && 2 * p.pad_h <= p.kernel_h && 2 * p.pad_w <= p.kernel_w)
      << "pooling padding must be at most half the kernel, as in PyTorch";
  const int64_t oh = (x[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  const int64_t ow = (x[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  CHECK(oh > 0 && ow > 0) << "pooling window larger than input " << ShapeToString(x);
  return {x[0], x[1], oh, ow};
}

void MaxPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& argmax) {
  CheckActivation(ctx, x, "max pool input", /*cuda_channels_last=*/true);
  CHECK(y.dtype() == x.dtype()) << "max pool output " << y.DebugString() << " for input " << x.DebugString();
  CheckSameFormat(x, y, "max pool");
  CHECK(y.shape() == Pool2dOutputShape(x.shape(), p)) << "max pool output " << y.DebugString();
  CheckSameShape(y, argmax, "max pool argmax");
  CHECK(argmax.dtype() == DType::kI32) << "max pool argmax must be i32";
  CheckOnDevice(ctx, "MaxPool2dForward", {&x, &y, &argmax});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("MaxPool2dForward", cuda::MaxPool2dForward(ctx, p, x, y, argmax));
  cpu::MaxPool2dForward(ctx, p, x, y, argmax);
}

void MaxPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, const Tensor& argmax,
                       Tensor& dx) {
  CheckActivation(ctx, dy, "max pool output gradient", /*cuda_channels_last=*/true);
  CHECK(dx.dtype() == dy.dtype()) << "max pool input gradient " << dx.DebugString() << " for " << dy.DebugString();
  CheckSameFormat(dy, dx, "max pool backward");
  CheckSameShape(dy, argmax, "max pool argmax");
  CHECK(dx.ndim() == 4 && dx.dim(0) == dy.dim(0) && dx.dim(1) == dy.dim(1)) << "max pool input gradient "
                                                                             << dx.DebugString();
  CHECK(dy.shape() == Pool2dOutputShape(dx.shape(), p)) << "max pool output gradient " << dy.DebugString();
  CheckOnDevice(ctx, "MaxPool2dBackward", {&dy, &argmax, &dx});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("MaxPool2dBackward", cuda::MaxPool2dBackward(ctx, p, dy, argmax, dx));
  cpu::MaxPool2dBackward(ctx, dy, argmax, dx);
}

void AvgPool2dForward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& x, Tensor& y) {
  CheckF32(x, "avg pool input");
  CHECK(!x.channels_last()) << "avg pool takes contiguous (NCHW) input, got " << x.DebugString();
  CHECK(y.shape() == Pool2dOutputShape(x.shape(), p)) << "avg pool output " << y.DebugString();
  CheckOnDevice(ctx, "AvgPool2dForward", {&x, &y});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("AvgPool2dForward", cuda::AvgPool2dForward(ctx, p, x, y));
  cpu::AvgPool2dForward(ctx, p, x, y);
}

void AvgPool2dBackward(ExecutionContext& ctx, const Pool2dParams& p, const Tensor& dy, Tensor& dx) {
  CheckF32(dx, "avg pool input gradient");
  CHECK(!dx.channels_last()) << "avg pool takes contiguous (NCHW) input, got " << dx.DebugString();
  CHECK(dy.shape() == Pool2dOutputShape(dx.shape(), p)) << "avg pool output gradient " << dy.DebugString();
  CheckOnDevice(ctx, "AvgPool2dBackward", {&dy, &dx});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("AvgPool2dBackward", cuda::AvgPool2dBackward(ctx, p, dy, dx));
  cpu::AvgPool2dBackward(ctx, p, dy, dx);
}

void GlobalAvgPoolForward(ExecutionContext& ctx, const Tensor& x, Tensor& y) {
  CheckActivation(ctx, x, "global avg pool input", /*cuda_channels_last=*/true);
  CHECK(y.dtype() == x.dtype()) << "global avg pool output " << y.DebugString() << " for input " << x.DebugString();
  CHECK(x.ndim() == 4 && y.shape() == Shape({x.dim(0), x.dim(1)}))
      << "global avg pool " << x.DebugString() << " -> " << y.DebugString();
  CheckOnDevice(ctx, "GlobalAvgPoolForward", {&x, &y});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("GlobalAvgPoolForward", cuda::GlobalAvgPoolForward(ctx, x, y));
  cpu::GlobalAvgPoolForward(ctx, x, y);
}

void GlobalAvgPoolBackward(ExecutionContext& ctx, const Tensor& dy, Tensor& dx) {
  CheckActivation(ctx, dx, "global avg pool input gradient", /*cuda_channels_last=*/true);
  CHECK(dy.dtype() == dx.dtype()) << "global avg pool gradient " << dy.DebugString() << " for " << dx.DebugString();
  CHECK(dx.ndim() == 4 && dy.shape() == Shape({dx.dim(0), dx.dim(1)}))
      << "global avg pool gradient " << dy.DebugString() << " -> " << dx.DebugString();
  CheckOnDevice(ctx, "GlobalAvgPoolBackward", {&dy, &dx});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("GlobalAvgPoolBackward", cuda::GlobalAvgPoolBackward(ctx, dy, dx));
  cpu::GlobalAvgPoolBackward(ctx, dy, dx);
}

}  // namespace ddp
