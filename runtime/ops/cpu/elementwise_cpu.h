// OpenMP loops behind runtime/ops/elementwise.h.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace ddp::cpu {

// Add and ReLU take f32 or bf16 tensors of one dtype and equal sizes.
void Add(const Tensor& a, const Tensor& b, Tensor& out);
void Axpy(float alpha, const float* x, float* y, int64_t n);
void Scale(float alpha, float* x, int64_t n);
void ReluForward(const Tensor& x, Tensor& y);
void ReluBackward(const Tensor& y, const Tensor& dy, Tensor& dx);
// f32 <-> bf16 or f16, times `scale`.
void CastScaled(const Tensor& src, float scale, Tensor& dst);

// dst = src, each in its own memory format and dtype (f32 or bf16), same
// logical [N, C, H, W].
void ConvertLayout(const Tensor& src, Tensor& dst);

}  // namespace ddp::cpu
