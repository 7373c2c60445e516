// --config: each field becomes the flag of its name unless the command line
// set it; a file that is missing or does not parse is one line naming it.
#include "launch/config_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include "runtime/testing/temp_path.h"

DECLARE_string(config);
DECLARE_string(model);
DECLARE_int64(batch_size);
DECLARE_double(lr);
DECLARE_bool(hflip);

namespace ddp {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFileTest, FieldsBecomeFlags) {
  gflags::FlagSaver saved;
  FLAGS_config = Write("all.cfg", "model: \"resnet18\"\nbatch_size: 4\nlr: 0.1\nhflip: false\n");
  ASSERT_TRUE(ApplyConfigFile().ok());
  EXPECT_EQ(FLAGS_model, "resnet18");
  EXPECT_EQ(FLAGS_batch_size, 4);
  EXPECT_EQ(FLAGS_lr, 0.1);  // %.17g and back: the same double
  EXPECT_FALSE(FLAGS_hflip);
}

TEST(ConfigFileTest, TheCommandLineWins) {
  gflags::FlagSaver saved;
  ASSERT_FALSE(gflags::SetCommandLineOption("batch_size", "16").empty());  // as if given on the command line
  FLAGS_config = Write("override.cfg", "batch_size: 4\nmodel: \"resnet34\"\n");
  ASSERT_TRUE(ApplyConfigFile().ok());
  EXPECT_EQ(FLAGS_batch_size, 16);
  EXPECT_EQ(FLAGS_model, "resnet34");
}

TEST(ConfigFileTest, NoConfigChangesNothing) {
  gflags::FlagSaver saved;
  FLAGS_config = "";
  const int64_t before = FLAGS_batch_size;
  EXPECT_TRUE(ApplyConfigFile().ok());
  EXPECT_EQ(FLAGS_batch_size, before);
}

TEST(ConfigFileTest, FaultsAreOneLineNamingTheFile) {
  gflags::FlagSaver saved;
  FLAGS_config = "/nonexistent/run.cfg";
  EXPECT_EQ(ApplyConfigFile().message(), "--config /nonexistent/run.cfg: cannot open");
  FLAGS_config = Write("typo.cfg", "model: \"resnet18\"\nbatch_sise: 4\n");
  const std::string typo = ApplyConfigFile().message();
  EXPECT_EQ(typo.rfind("--config " + FLAGS_config + ": line 2: ", 0), 0u) << typo;
  EXPECT_NE(typo.find("batch_sise"), std::string::npos) << typo;
  FLAGS_config = Write("type.cfg", "batch_size: \"four\"\n");
  const std::string type = ApplyConfigFile().message();
  EXPECT_EQ(type.rfind("--config " + FLAGS_config + ": line 1: ", 0), 0u) << type;
}

}  // namespace
}  // namespace ddp
