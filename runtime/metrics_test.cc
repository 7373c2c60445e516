#include "runtime/metrics.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "runtime/durable_files.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string Read(const std::string& path) {
  StatusOr<std::string> text = ReadWholeFile(path);
  EXPECT_TRUE(text.ok()) << text.status().message();
  return text.ok() ? *text : "";
}

TEST(MetricsWriterTest, OpenTruncatesAndWriteAppendsWholeLines) {
  const std::string path = testing::TempPath("fresh.jsonl");
  ASSERT_TRUE(WriteFileDurably(path, "old\n").ok());
  MetricsWriter metrics;
  ASSERT_TRUE(metrics.Open(path).ok());
  ASSERT_TRUE(metrics.Write({{"step", 1}, {"loss", 2.5}}).ok());
  ASSERT_TRUE(metrics.Write({{"summary", {{"steps", 1}}}}).ok());
  EXPECT_EQ(Read(path), "{\"step\":1,\"loss\":2.5}\n{\"summary\":{\"steps\":1}}\n");
}

TEST(MetricsWriterTest, ResumedRunKeepsStepsUpToItsCheckpointAndDropsWhatItRepeats) {
  const std::string path = testing::TempPath("resumed.jsonl");
  // A first attempt preempted after step 3 (its summary written), resumed
  // from a checkpoint of step 2 by a second attempt that crashed at step 4
  // mid-line; now resumed again from step 2.
  ASSERT_TRUE(WriteFileDurably(path,
                               "{\"step\":1,\"loss\":3.0}\n"
                               "{\"step\":2,\"loss\":2.0,\"checkpoint_stall_s\":0.1}\n"
                               "{\"step\":3,\"loss\":1.0}\n"
                               "{\"summary\":{\"preempted_at_step\":3}}\n"
                               "not json, kept\n"
                               "{\"step\":3,\"loss\":1.0}\n"
                               "{\"step\":4,\"lo")
                  .ok());
  MetricsWriter metrics;
  ASSERT_TRUE(metrics.OpenResumed(path, 2).ok());
  ASSERT_TRUE(metrics.Write({{"step", 3}, {"loss", 1.0}}).ok());
  EXPECT_EQ(Read(path),
            "{\"step\":1,\"loss\":3.0}\n"
            "{\"step\":2,\"loss\":2.0,\"checkpoint_stall_s\":0.1}\n"
            "not json, kept\n"
            "{\"step\":3,\"loss\":1.0}\n");
  EXPECT_FALSE(PathExists(path + ".tmp"));
}

TEST(MetricsWriterTest, ResumedRunWithoutAFileStartsOne) {
  const std::string path = testing::TempPath("new_on_resume.jsonl");
  MetricsWriter metrics;
  ASSERT_TRUE(metrics.OpenResumed(path, 5).ok());
  ASSERT_TRUE(metrics.Write({{"step", 6}}).ok());
  EXPECT_EQ(Read(path), "{\"step\":6}\n");
}

TEST(MetricsWriterTest, UnwritablePathNamesTheFlag) {
  MetricsWriter metrics;
  const Status s = metrics.Open("/nonexistent-dir/m.jsonl");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--metrics-file /nonexistent-dir/m.jsonl"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ddp
