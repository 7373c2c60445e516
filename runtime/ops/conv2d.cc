#include "runtime/ops/conv2d.h"

#include "runtime/ops/cpu/conv2d_cpu.h"
#include "runtime/ops/cpu/dnnl_util.h"
#include "runtime/ops/cuda/cudnn_ops.h"
#include "runtime/ops/op_checks.h"

namespace ddp {

bool CpuHasFastBf16() { return cpu::CpuHasNativeBf16(); }

Shape Conv2dOutputShape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  CHECK_EQ(x.size(), 4u) << "conv2d input must be NCHW, got " << ShapeToString(x);
  CHECK_EQ(w.size(), 4u) << "conv2d weights must be OIHW, got " << ShapeToString(w);
  CHECK(p.groups >= 1 && x[1] % p.groups == 0 && w[0] % p.groups == 0)
      << "conv2d groups " << p.groups << " must divide channels of input " << ShapeToString(x) << " and weights "
      << ShapeToString(w);
  CHECK_EQ(w[1] * p.groups, x[1]) << "conv2d weights " << ShapeToString(w) << " do not match input "
                                  << ShapeToString(x) << " with groups " << p.groups;
  CHECK(p.stride_h >= 1 && p.stride_w >= 1 && p.dilation_h >= 1 && p.dilation_w >= 1 && p.pad_h >= 0 &&
        p.pad_w >= 0)
      << "conv2d stride and dilation must be positive, padding non-negative";
  const int64_t kh = (w[2] - 1) * p.dilation_h + 1;
  const int64_t kw = (w[3] - 1) * p.dilation_w + 1;
  // Before dividing: integer division truncates toward zero, so a window one
  // short of the padded input would otherwise still give one output row.
  CHECK(x[2] + 2 * p.pad_h >= kh && x[3] + 2 * p.pad_w >= kw)
      << "conv2d kernel " << ShapeToString(w) << " larger than padded input " << ShapeToString(x);
  const int64_t oh = (x[2] + 2 * p.pad_h - kh) / p.stride_h + 1;
  const int64_t ow = (x[3] + 2 * p.pad_w - kw) / p.stride_w + 1;
  CHECK(oh > 0 && ow > 0) << "conv2d kernel " << ShapeToString(w) << " larger than padded input "
                          << ShapeToString(x);
  return {x[0], w[0], oh, ow};
}


namespace {

// Data and weights share one dtype: f32, or bf16 on the CPU (mixed
// precision); bias and weight gradients are f32 (or the data's dtype).
void CheckTypes(const ExecutionContext& ctx, const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
  CheckActivation(ctx, a, op, /*cuda_channels_last=*/true);
  CHECK(b.dtype() == a.dtype() && c.dtype() == a.dtype())
      << op << ": " << a.DebugString() << ", " << b.DebugString() << " and " << c.DebugString()
      << " must share a dtype";
}

// A meta step planning a CUDA rank: the slot the chosen cuDNN algorithms'
// workspace takes, at its bound.
void ReserveCudnnWorkspace(ExecutionContext& ctx) {
  ctx.Scratch(ExecutionContext::kLibraryWorkspaceSlot, ExecutionContext::kConvWorkspaceBoundBytes);
}

}  // namespace

void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor* bias, Tensor& y) {
  CheckTypes(ctx, "Conv2dForward", x, w, y);
  CheckSameFormat(x, y, "Conv2dForward");
  if (bias) CheckF32(*bias, "conv2d bias");
  CHECK(y.shape() == Conv2dOutputShape(x.shape(), w.shape(), p))
      << "conv2d output " << y.DebugString() << " for input " << x.DebugString();
  if (bias) CHECK(bias->shape() == Shape{w.dim(0)}) << "conv2d bias " << bias->DebugString();
  CheckOnDevice(ctx, "Conv2dForward", {&x, &w, &y});
  if (bias) CheckOnDevice(ctx, "Conv2dForward", {bias});
  if (OnMeta(ctx)) {
    if (ctx.planned_device().is_cpu()) cpu::PlanConv2dForward(ctx, p, x, w, bias != nullptr);
    if (ctx.planned_device().is_cuda()) {
      ReserveCudnnWorkspace(ctx);
      // cuDNN adds a bias of the output's type: a 16-bit copy of the f32 one.
      if (bias && x.dtype() != DType::kF32) ctx.ScratchTensor(ExecutionContext::kConvBiasSlot, bias->shape(), x.dtype());
    }
    return;
  }
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("Conv2dForward", cuda::Conv2dForward(ctx, p, x, w, bias, y));
  cpu::Conv2dForward(ctx, p, x, w, bias, y);
}

void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                        Tensor& dx) {
  CheckTypes(ctx, "Conv2dBackwardData", dy, w, dx);
  CheckSameFormat(dy, dx, "Conv2dBackwardData");
  CHECK(dy.shape() == Conv2dOutputShape(dx.shape(), w.shape(), p))
      << "conv2d output gradient " << dy.DebugString() << " for input gradient " << dx.DebugString();
  CheckOnDevice(ctx, "Conv2dBackwardData", {&dy, &w, &dx});
  if (OnMeta(ctx)) {
    if (ctx.planned_device().is_cpu()) cpu::PlanConv2dBackwardData(ctx, p, w, dx);
    if (ctx.planned_device().is_cuda()) ReserveCudnnWorkspace(ctx);
    return;
  }
  if (ctx.device().is_cuda()) return DDP_ON_CUDA("Conv2dBackwardData", cuda::Conv2dBackwardData(ctx, p, dy, w, dx));
  cpu::Conv2dBackwardData(ctx, p, dy, w, dx);
}

void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                           Tensor& dw, Tensor* dbias) {
  CheckTypes(ctx, "Conv2dBackwardWeights", x, dy, dy);
  CheckSameFormat(x, dy, "Conv2dBackwardWeights");
  CHECK(dw.dtype() == DType::kF32 || dw.dtype() == x.dtype())
      << "conv2d weight gradient " << dw.DebugString() << " for input " << x.DebugString();
  if (dbias) CheckF32(*dbias, "conv2d bias gradient");
  CHECK(dy.shape() == Conv2dOutputShape(x.shape(), dw.shape(), p))
      << "conv2d output gradient " << dy.DebugString() << " for weights " << dw.DebugString();
  if (dbias) CHECK(dbias->shape() == Shape{dw.dim(0)}) << "conv2d bias gradient " << dbias->DebugString();
  CheckOnDevice(ctx, "Conv2dBackwardWeights", {&x, &dy, &dw});
  if (dbias) CheckOnDevice(ctx, "Conv2dBackwardWeights", {dbias});
  if (OnMeta(ctx)) {
    if (ctx.planned_device().is_cpu()) cpu::PlanConv2dBackwardWeights(ctx, p, x, dw, dbias != nullptr);
    if (ctx.planned_device().is_cuda()) {
      ReserveCudnnWorkspace(ctx);
      // cuDNN writes the data's type and layout; staged, then widened.
      if (dw.dtype() != x.dtype() || dw.format() != x.format()) {
        ctx.ScratchTensor(ExecutionContext::kConvWeightGradSlot, dw.shape(), x.dtype());
      }
    }
    return;
  }
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("Conv2dBackwardWeights", cuda::Conv2dBackwardWeights(ctx, p, x, dy, dw, dbias));
  }
  cpu::Conv2dBackwardWeights(ctx, p, x, dy, dw, dbias);
}

}  // namespace ddp
