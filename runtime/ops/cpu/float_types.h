// The element types CPU kernels compute on: f32, and bf16 for mixed
// precision (stored as bf16, computed in f32, rounded to nearest even on
// store). Kernels are templates over the storage type S: float, or
// uint16_t holding bf16 bits (plain integers, so loops over them vectorize,
// which loops over the BFloat16 struct do not). DispatchFloat picks S from a
// tensor's dtype; Elements<S> reads a tensor's data as S.
#pragma once

#include <cstdint>

#include <glog/logging.h>

#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace ddp::cpu {

inline float ToFloat(float v) { return v; }
inline float ToFloat(uint16_t bf16_bits) { return BitsToFloat(static_cast<uint32_t>(bf16_bits) << 16); }

template <typename S>
S FromFloat(float v);
template <>
inline float FromFloat<float>(float v) {
  return v;
}
template <>
inline uint16_t FromFloat<uint16_t>(float v) {
  return FloatToBFloat16(v).bits;
}

template <typename S>
constexpr DType kStorageDType = DType::kF32;
template <>
constexpr DType kStorageDType<uint16_t> = DType::kBF16;

// t's elements as storage type S (checked against its dtype).
template <typename S>
S* Elements(const Tensor& t) {
  CHECK(t.dtype() == kStorageDType<S>) << t.DebugString() << " read as " << DTypeName(kStorageDType<S>);
  return static_cast<S*>(t.raw_data());
}

// Calls run(S()) with S the storage type of `dtype` (float, or uint16_t for
// bf16).
template <typename Run>
void DispatchFloat(DType dtype, const char* op, Run&& run) {
  switch (dtype) {
    case DType::kF32: run(float()); return;
    case DType::kBF16: run(uint16_t()); return;
    default: LOG(FATAL) << op << " has no CPU kernel for " << DTypeName(dtype);
  }
}

}  // namespace ddp::cpu
