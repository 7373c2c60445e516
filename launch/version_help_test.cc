// --help lists every ddp_train flag in its group with its default, and no
// logging-library flag; --version's lines name the version, commit, CUDA,
// oneDNN and MPI.
#include <gtest/gtest.h>

#include "launch/flag_help.h"
#include "launch/version.h"

namespace ddp {
namespace {

const std::vector<std::string> kFiles = {"launch/train_options.cc", "launch/plan_options.cc"};

TEST(FlagHelpTest, EveryFlagInOneGroupAndEveryGroupedNameAFlag) {
  EXPECT_EQ(UngroupedFlags(kFiles), std::vector<std::string>());
  EXPECT_EQ(UnknownGroupedFlags(), std::vector<std::string>());
  int named = 0;
  for (const FlagGroup& g : FlagGroups()) named += static_cast<int>(g.flags.size());
  EXPECT_GT(named, 60);
}

TEST(FlagHelpTest, GroupedWithDefaults) {
  const std::string help = GroupedHelp("usage: ddp_train", kFiles);
  EXPECT_EQ(help.rfind("usage: ddp_train\n", 0), 0u);
  for (const char* title : {"\nWhat runs:\n", "\nHow long, how much:\n", "\nOptimizer:\n", "\nData:\n",
                            "\nDistributed:\n", "\nFiles:\n", "\nObservability:\n"}) {
    EXPECT_NE(help.find(title), std::string::npos) << title;
  }
  EXPECT_NE(help.find("  --batch-size=8\n      samples per rank per micro-batch\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --resume (default false)\n"), std::string::npos);
  EXPECT_NE(help.find("  --comm-timeout-s=300\n"), std::string::npos);
  EXPECT_NE(help.find("  --max-skipped-share=0.05\n"), std::string::npos);  // a double, as people write it
  EXPECT_LT(help.find("--batch-size"), help.find("\nOptimizer:\n"));  // in its group
  EXPECT_EQ(help.find("\nOther:\n"), std::string::npos);
  EXPECT_EQ(help.find("logtostderr"), std::string::npos);  // glog's: --helpfull
}

TEST(VersionTest, OneLineEach) {
  const std::vector<std::string> lines = VersionLines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind(std::string("ddp_train ") + kDdpTrainVersion + " (git ", 0), 0u) << lines[0];
#ifdef DDP_HAVE_CUDA
  EXPECT_EQ(lines[1].rfind("CUDA: compiled in, built against CUDA ", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("GPU code for sm_89, sm_90"), std::string::npos) << lines[1];
#else
  EXPECT_EQ(lines[1].rfind("CUDA: not compiled in", 0), 0u) << lines[1];
#endif
  EXPECT_EQ(lines[2].rfind("oneDNN ", 0), 0u) << lines[2];
  EXPECT_NE(lines[3].find("MPI"), std::string::npos) << lines[3];
}

TEST(VersionTest, DottedVersions) {
  EXPECT_EQ(DottedVersion(13000, "cuda"), "13.0");
  EXPECT_EQ(DottedVersion(12080, "cuda"), "12.8");
  EXPECT_EQ(DottedVersion(91000, "cudnn"), "9.10.0");
  EXPECT_EQ(DottedVersion(22803, "nccl"), "2.28.3");
  EXPECT_EQ(DottedVersion(130100, "cublaslt"), "13.1.0");
}

}  // namespace
}  // namespace ddp
