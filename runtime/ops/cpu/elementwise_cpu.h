// OpenMP loops behind runtime/ops/elementwise.h.
#pragma once

#include <cstdint>

namespace ddp::cpu {

void Add(const float* a, const float* b, float* out, int64_t n);
void Axpy(float alpha, const float* x, float* y, int64_t n);
void Scale(float alpha, float* x, int64_t n);
void ReluForward(const float* x, float* y, int64_t n);
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n);

}  // namespace ddp::cpu
