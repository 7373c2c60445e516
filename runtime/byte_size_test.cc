#include "runtime/byte_size.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

int64_t Parsed(const std::string& text) {
  StatusOr<int64_t> bytes = ParseByteSize("--size", text);
  EXPECT_TRUE(bytes.ok()) << text << ": " << bytes.status().ToString();
  return bytes.ok() ? *bytes : -1;
}

TEST(ByteSizeTest, BinaryAndDecimalUnits) {
  EXPECT_EQ(Parsed("24GiB"), int64_t{24} << 30);
  EXPECT_EQ(Parsed("24G"), int64_t{24} << 30);
  EXPECT_EQ(Parsed("24GB"), int64_t{24000000000});
  EXPECT_EQ(Parsed("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(Parsed("1.5KiB"), 1536);
  EXPECT_EQ(Parsed("3kB"), 3000);
  EXPECT_EQ(Parsed("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(Parsed("2e9"), int64_t{2000000000});
  EXPECT_EQ(Parsed("4096"), 4096);
  EXPECT_EQ(Parsed("4096B"), 4096);
}

TEST(ByteSizeTest, BadTextNamesTheFlag) {
  for (const std::string text : {"", "GiB", "24 GiB", "24gib", "24XB", "-1GiB", "0", "0.5", "nan", "1e30GiB"}) {
    StatusOr<int64_t> bytes = ParseByteSize("--device-memory-limit", text);
    ASSERT_FALSE(bytes.ok()) << text;
    EXPECT_EQ(bytes.status().message().rfind("--device-memory-limit '" + text + "' ", 0), 0u)
        << bytes.status().message();
  }
}

TEST(ByteSizeTest, Formats) {
  EXPECT_EQ(FormatBytes(300), "300 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{24} << 30), "24.0 GiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 40), "3.0 TiB");
}

}  // namespace
}  // namespace ddp
