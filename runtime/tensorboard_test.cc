// CRC-32C against known answers (RFC 3720's iSCSI test vectors), and event
// files written, read back with every CRC checked, decoded as TensorBoard
// decodes them, and refused when a byte is flipped.
#include "runtime/tensorboard.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/crc32c.h"
#include "runtime/durable_files.h"
#include "runtime/tensorboard_event.pb.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

TEST(Crc32cTest, KnownAnswers) {
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF);
  std::vector<uint8_t> ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i), descending[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(ascending.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  // In pieces, the same.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
  // TensorFlow's mask of a CRC of 0 is its delta.
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

TEST(TensorBoardTest, EventsReadBackWithTheirScalars) {
  const std::string dir = testing::TempPath("tb/run");  // created with its parent
  TensorBoardWriter writer;
  ASSERT_TRUE(writer.Open(dir).ok());
  EXPECT_NE(writer.path().find(dir + "/events.out.tfevents."), std::string::npos) << writer.path();
  ASSERT_TRUE(writer.AddScalars(1, {{"train/loss", 2.5}, {"train/lr", 0.1}}).ok());
  ASSERT_TRUE(writer.AddScalars(2, {{"train/loss", 2.25}}).ok());
  StatusOr<std::vector<std::string>> records = ReadTfRecords(writer.path());
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 3u);
  tensorboard::Event first, one, two;
  ASSERT_TRUE(first.ParseFromString((*records)[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  EXPECT_GT(first.wall_time(), 1.7e9);
  ASSERT_TRUE(one.ParseFromString((*records)[1]));
  EXPECT_EQ(one.step(), 1);
  ASSERT_EQ(one.summary().value_size(), 2);
  EXPECT_EQ(one.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(one.summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(one.summary().value(1).tag(), "train/lr");
  EXPECT_EQ(one.summary().value(1).simple_value(), 0.1f);
  ASSERT_TRUE(two.ParseFromString((*records)[2]));
  EXPECT_EQ(two.step(), 2);
  EXPECT_EQ(two.summary().value(0).simple_value(), 2.25f);
}

TEST(TensorBoardTest, AFlippedByteOrATruncatedFileIsNamed) {
  const std::string dir = testing::TempPath("tb_bad");
  std::string path;
  {
    TensorBoardWriter writer;
    ASSERT_TRUE(writer.Open(dir).ok());
    ASSERT_TRUE(writer.AddScalars(7, {{"x", 1.0}}).ok());
    path = writer.path();
  }
  std::string bytes = ReadWholeFile(path).value();
  std::string data_flipped = bytes;
  data_flipped[bytes.size() - 6] ^= 1;  // inside the last record's data
  ASSERT_TRUE(WriteFileDurably(path, data_flipped).ok());
  EXPECT_NE(ReadTfRecords(path).status().message().find("record 1 at byte"), std::string::npos);
  EXPECT_NE(ReadTfRecords(path).status().message().find("the data's CRC-32C does not match"), std::string::npos);
  std::string length_flipped = bytes;
  length_flipped[0] ^= 1;
  ASSERT_TRUE(WriteFileDurably(path, length_flipped).ok());
  EXPECT_NE(ReadTfRecords(path).status().message().find("record 0 at byte 0: the length's CRC-32C does not match"),
            std::string::npos);
  ASSERT_TRUE(WriteFileDurably(path, bytes.substr(0, bytes.size() - 2)).ok());
  EXPECT_NE(ReadTfRecords(path).status().message().find("truncated data"), std::string::npos);
  // An unwritable place is refused with the flag's name.
  TensorBoardWriter nowhere;
  const Status s = nowhere.Open("/proc/no/such/dir");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("--tensorboard-dir ", 0), 0u) << s.message();
}

}  // namespace
}  // namespace ddp
