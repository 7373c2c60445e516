// Element types of tensors, with the safetensors spelling of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ddp {

enum class DType : uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };

size_t DTypeSize(DType dtype);
// "f32", "bf16", ...: for messages.
const char* DTypeName(DType dtype);
// "F32", "BF16", ...: the safetensors header spelling.
const char* SafetensorsDTypeName(DType dtype);
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);

// Maps a C++ element type to its DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kU8; };

// IEEE binary16 and bfloat16 storage types with round-to-nearest-even
// conversion from float.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBF16; };

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Branch-free (a select), so loops of it vectorize.
inline BFloat16 FloatToBFloat16(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return BFloat16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}
inline float BFloat16ToFloat(BFloat16 b) { return BitsToFloat(static_cast<uint32_t>(b.bits) << 16); }

Half FloatToHalf(float f);
float HalfToFloat(Half h);

}  // namespace ddp
