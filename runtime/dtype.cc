#include "runtime/dtype.h"

#include <cmath>

#include <glog/logging.h>

namespace ddp {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  const char* name;
  const char* safetensors_name;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, 4, "f32", "F32"},   {DType::kF64, 8, "f64", "F64"}, {DType::kF16, 2, "f16", "F16"},
    {DType::kBF16, 2, "bf16", "BF16"}, {DType::kI32, 4, "i32", "I32"}, {DType::kI64, 8, "i64", "I64"},
    {DType::kU8, 1, "u8", "U8"},
};

const DTypeInfo& Info(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  LOG(FATAL) << "unknown DType " << static_cast<int>(dtype);
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }
const char* DTypeName(DType dtype) { return Info(dtype).name; }
const char* SafetensorsDTypeName(DType dtype) { return Info(dtype).safetensors_name; }

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.safetensors_name) return info.dtype;
  }
  return std::nullopt;
}

Half FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow to inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in half: scale so that rounding happens at the
    // half-precision subnormal step of 2^-24, using the FPU's nearest-even.
    const float scaled = std::fabs(f) * 16777216.0f;  // 2^24
    return Half{static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits.
  uint32_t mantissa_round = abs + 0xfffu + ((abs >> 13) & 1u);
  return Half{static_cast<uint16_t>(sign | ((mantissa_round - 0x38000000u) >> 13))};
}

float HalfToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace ddp
