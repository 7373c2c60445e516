// Durable files: CRC-32 is zlib's (the standard check value, and chunked
// input continues it); a durable write reads back; an atomic replacement
// leaves no temporary behind; directories are made, listed and removed.
#include "runtime/durable_files.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

TEST(DurableFilesTest, Crc32IsZlibs) {
  const std::string check = "123456789";
  EXPECT_EQ(Crc32(check.data(), check.size()), 0xCBF43926u);
  // Continued over pieces, the same value.
  const uint32_t first = Crc32(check.data(), 4);
  EXPECT_EQ(Crc32(check.data() + 4, 5, first), 0xCBF43926u);
  EXPECT_EQ(Crc32(nullptr, 0), 0u);
}

TEST(DurableFilesTest, WritesReadsReplacesListsAndRemoves) {
  const std::string root = testing::TempPath("durable/a/b");
  ASSERT_TRUE(RemoveTree(testing::TempPath("durable")).ok());
  ASSERT_TRUE(MakeDirectories(root).ok());
  ASSERT_TRUE(MakeDirectories(root).ok());  // idempotent
  const std::string bytes("payload\0with nul", 16);
  ASSERT_TRUE(WriteFileDurably(root + "/f", bytes).ok());
  StatusOr<std::string> back = ReadWholeFile(root + "/f");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, bytes);

  ASSERT_TRUE(ReplaceFileAtomically(root + "/latest", "step_1").ok());
  ASSERT_TRUE(ReplaceFileAtomically(root + "/latest", "step_2").ok());
  EXPECT_EQ(*ReadWholeFile(root + "/latest"), "step_2");
  EXPECT_FALSE(PathExists(root + "/latest.tmp"));

  ASSERT_TRUE(MakeDirectories(root + "/d.tmp").ok());
  ASSERT_TRUE(WriteFileDurably(root + "/d.tmp/x", "x").ok());
  ASSERT_TRUE(RenameDurably(root + "/d.tmp", root + "/d").ok());
  EXPECT_EQ(ListDirectory(root), (std::vector<std::string>{"d", "f", "latest"}));
  EXPECT_EQ(*ReadWholeFile(root + "/d/x"), "x");

  ASSERT_TRUE(RemoveTree(testing::TempPath("durable")).ok());
  EXPECT_FALSE(PathExists(root));
  EXPECT_TRUE(ListDirectory(root).empty());
  EXPECT_EQ(ReadWholeFile(root + "/f").status().code(), StatusCode::kNotFound);
}

TEST(DurableFilesTest, ErrorsNameThePath) {
  const Status s = WriteFileDurably("/nonexistent_dir_ddp/x", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent_dir_ddp/x"), std::string::npos) << s.message();
  const std::string file = testing::TempPath("durable_file");
  ASSERT_TRUE(WriteFileDurably(file, "x").ok());
  const Status d = MakeDirectories(file + "/sub");
  EXPECT_FALSE(d.ok());
}

}  // namespace
}  // namespace ddp
