// Outputs against inputs: the same file by name, through a symbolic link
// and a hard link; inside a directory read whole; two outputs on one path;
// an output that is a directory or cannot be written.
#include "runtime/path_use.h"

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string Touch(const std::string& name) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path) << "x";
  return path;
}

std::string Error(const std::vector<PathUse>& inputs, const std::vector<PathUse>& outputs) {
  const Status s = CheckOutputPaths(inputs, outputs);
  return s.ok() ? "ok" : s.message();
}

TEST(PathUseTest, AnOutputOnAnInputIsRefusedHoweverItIsNamed) {
  const std::string vocab = Touch("vocab.txt");
  const std::string link = testing::TempPath("vocab_link.txt"), hard = testing::TempPath("vocab_hard.txt");
  ::unlink(link.c_str());
  ::unlink(hard.c_str());
  ASSERT_EQ(::symlink(vocab.c_str(), link.c_str()), 0);
  ASSERT_EQ(::link(vocab.c_str(), hard.c_str()), 0);
  const std::vector<PathUse> inputs = {{"--vocab", vocab}};
  const std::string expected = " is the --vocab file " + vocab + ": writing it would destroy the input; choose another path";
  EXPECT_EQ(Error(inputs, {{"--out", vocab}}), "--out " + vocab + expected);
  EXPECT_EQ(Error(inputs, {{"--out", link}}), "--out " + link + expected);
  EXPECT_EQ(Error(inputs, {{"--out", hard}}), "--out " + hard + expected);
  const std::string dotted = testing::TempPath("./vocab.txt");
  EXPECT_EQ(Error(inputs, {{"--out", dotted}}), "--out " + dotted + expected);
  EXPECT_EQ(Error(inputs, {{"--out", testing::TempPath("other.safetensors")}}), "ok");
}

TEST(PathUseTest, AnOutputInsideADirectoryReadWholeIsRefused) {
  const std::string dir = testing::TempPath("step_00000010");
  ::mkdir(dir.c_str(), 0755);
  Touch("step_00000010/model.safetensors");
  const std::string inside = dir + "/model.safetensors", fresh = dir + "/new.safetensors";
  EXPECT_EQ(Error({{"--checkpoint", dir, true, true}}, {{"--out", inside}}),
            "--out " + inside + " is inside the --checkpoint " + dir +
                ", which is read whole: writing there would change the input; choose another path");
  EXPECT_NE(Error({{"--checkpoint", dir, true, true}}, {{"--out", fresh}}), "ok");
  // A directory only some of whose files are read takes outputs beside them.
  EXPECT_EQ(Error({{"--checkpoint-dir", dir, true, false}}, {{"--metrics-file", fresh}}), "ok");
  // A sibling whose name starts alike is not inside.
  EXPECT_EQ(Error({{"--checkpoint", dir, true, true}}, {{"--out", dir + "x.safetensors"}}), "ok");
}

TEST(PathUseTest, OutputsMustBeWritableFilesOfTheirOwn) {
  const std::string a = testing::TempPath("a.st");
  EXPECT_EQ(Error({}, {{"--out", a}, {"--save", a}}),
            "--out and --save are both " + a + ": one would overwrite the other; give each its own path");
  EXPECT_EQ(Error({}, {{"--out", "."}}), "--out . is a directory; give a file's path");
  EXPECT_EQ(Error({}, {{"--out", "/nonexistent/dir/x.st"}}),
            "--out /nonexistent/dir/x.st: directory /nonexistent/dir does not exist");
}

}  // namespace
}  // namespace ddp
