// Every ResNet's state dict has exactly torchvision's entries, in order, with
// the same dtypes and shapes (tests/golden/make_resnet_manifest.py read them from
// torchvision), so torch's load_state_dict(strict=True) accepts ddp_train's
// saved weights, and ddp_train's strict loader accepts torch's.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/registry.h"

namespace ddp {
namespace {

class StateDictManifestTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StateDictManifestTest, MatchesTorchvisionExactly) {
  std::ifstream in("tests/golden/torchvision_state_dicts.json");
  ASSERT_TRUE(in) << "manifest missing";
  const nlohmann::json expected = nlohmann::json::parse(in)[GetParam()];
  ModelOptions options;
  options.name = GetParam();
  std::unique_ptr<Model> model = std::move(CreateModel(options)).value();
  const auto state = model->StateDict();
  ASSERT_EQ(state.size(), expected.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& [name, tensor] = state[i];
    EXPECT_EQ(name, expected[i][0].get<std::string>()) << "entry " << i;
    EXPECT_EQ(DTypeName(tensor.dtype()), expected[i][1].get<std::string>()) << name;
    EXPECT_EQ(tensor.shape(), expected[i][2].get<Shape>()) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(ResNets, StateDictManifestTest,
                         ::testing::Values("resnet18", "resnet34", "resnet50", "resnet101", "resnet152"));

}  // namespace
}  // namespace ddp
