// Philox4x32-10 against the known-answer vectors of its authors' Random123
// distribution (kat_vectors), and the float draw's range.
#include "runtime/philox.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

void ExpectPhilox(Philox4x32 counter, uint32_t k0, uint32_t k1, Philox4x32 expected) {
  const Philox4x32 got = Philox4x32_10(counter, k0, k1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], expected.v[i]) << "word " << i;
}

TEST(PhiloxTest, KnownAnswers) {
  ExpectPhilox({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  ExpectPhilox({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
               {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  ExpectPhilox({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
               {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST(PhiloxTest, UniformIsInTheUnitInterval) {
  EXPECT_EQ(UniformFromBits(0), 0.0f);
  EXPECT_LT(UniformFromBits(0xffffffffu), 1.0f);
  EXPECT_EQ(UniformFromBits(0x80000000u), 0.5f);
}

}  // namespace
}  // namespace ddp
