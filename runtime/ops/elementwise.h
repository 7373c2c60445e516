// Elementwise arithmetic and ReLU. Each runs on the context's device:
// OpenMP loops on CPU, the kernels of cuda/elementwise_kernels.cu on CUDA.
// Operands share one dtype: f32, or for Add and ReLU (activations) bf16 on
// the CPU, computed in f32 and rounded to nearest even.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

// out = a + b (out may alias a or b).
void Add(ExecutionContext& ctx, const Tensor& a, const Tensor& b, Tensor& out);
// y += alpha * x.
void Axpy(ExecutionContext& ctx, float alpha, const Tensor& x, Tensor& y);
// x *= alpha.
void Scale(ExecutionContext& ctx, float alpha, Tensor& x);
// y = max(x, 0) (y may alias x); NaN stays NaN, as in PyTorch.
void ReluForward(ExecutionContext& ctx, const Tensor& x, Tensor& y);
// dx = 0 where the ReLU's output y <= 0, else dy (so a NaN y passes dy, as in
// PyTorch's threshold_backward); dx may alias dy.
void ReluBackward(ExecutionContext& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
// dst = src (any dtype, equal element counts), on the context's device or
// between it and the host, ordered on the context's stream.
void Copy(ExecutionContext& ctx, const Tensor& src, Tensor& dst);
// counter += 1 for an i64 scalar (BN's num_batches_tracked), on its device.
void Increment(ExecutionContext& ctx, Tensor& counter);
// dst = src * scale between f32 and a 16-bit float (bf16 or f16), either
// way, rounding to nearest even: gradient compression on the wire.
void CastScaled(ExecutionContext& ctx, const Tensor& src, float scale, Tensor& dst);

// dst = src in another memory format and/or dtype (f32 or bf16 either way,
// and f16 on CUDA): e.g. f32 NCHW images into bf16 channels-last
// activations at a model's edge, or [K, C, R, S] weights into a 16-bit
// [K, R, S, C] copy. Shapes (logical, NCHW) must be equal.
void ConvertLayout(ExecutionContext& ctx, const Tensor& src, Tensor& dst);

}  // namespace ddp
