// OpenMP loops behind runtime/ops/elementwise.h.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace ddp::cpu {

void Add(const float* a, const float* b, float* out, int64_t n);
void Axpy(float alpha, const float* x, float* y, int64_t n);
void Scale(float alpha, float* x, int64_t n);
void ReluForward(const float* x, float* y, int64_t n);
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n);
// f32 <-> bf16 or f16, times `scale`.
void CastScaled(const Tensor& src, float scale, Tensor& dst);

}  // namespace ddp::cpu
