#include "runtime/dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kU8), 1u);
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
    EXPECT_EQ(DTypeFromSafetensorsName(SafetensorsDTypeName(d)), d);
  }
  EXPECT_FALSE(DTypeFromSafetensorsName("F8_E4M3").has_value());
  EXPECT_FALSE(DTypeFromSafetensorsName("f32").has_value());
}

TEST(DTypeTest, HalfRoundTripsEveryFiniteValue) {
  // Every finite half converts to float and back to itself.
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    Half h{static_cast<uint16_t>(bits)};
    const uint32_t exponent = (bits >> 10) & 0x1fu;
    if (exponent == 31) continue;
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)).bits, h.bits) << bits;
  }
}

TEST(DTypeTest, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f).bits, 0x3c00u);
  EXPECT_EQ(FloatToHalf(-2.0f).bits, 0xc000u);
  EXPECT_EQ(FloatToHalf(65504.0f).bits, 0x7bffu);
  EXPECT_EQ(FloatToHalf(65520.0f).bits, 0x7c00u);  // rounds to inf
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)).bits, 0x0001u);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00u);  // tie to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02u);  // tie to even, upward
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_FLOAT_EQ(HalfToFloat(Half{0x3555}), 0.333251953125f);
}

TEST(DTypeTest, BFloat16KnownValues) {
  EXPECT_EQ(FloatToBFloat16(1.0f).bits, 0x3f80u);
  EXPECT_EQ(BFloat16ToFloat(BFloat16{0x4049}), 3.140625f);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1).
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80u);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82u);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace ddp
