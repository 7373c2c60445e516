// Weights out and back in: a model saved and loaded into another is equal
// bit for bit; non-finite weights are refused on both sides, naming the
// tensor; a file for another model is refused naming the file.
#include "launch/weights_file.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "models/registry.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

std::unique_ptr<Model> Make(const std::string& name, uint64_t seed) {
  ModelOptions m;
  m.name = name;
  m.num_classes = 10;
  m.seed = seed;
  return std::move(CreateModel(m).value());
}

TEST(WeightsFileTest, SavedAndLoadedBitForBit) {
  const std::string path = std::string(::testing::TempDir()) + "/w.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> a = Make("resnet18", 1), b = Make("resnet18", 2);
  ASSERT_TRUE(SaveWeightsFile(path, *a, ctx, "resnet18").ok());
  StatusOr<SafetensorsContents> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata.at("model"), "resnet18");
  EXPECT_EQ(file->metadata.at("format"), "pt");
  ASSERT_TRUE(LoadWeightsFile(path, *b, "resnet18", false).ok());
  const Tensor& pa = a->flat_parameters();
  EXPECT_EQ(std::memcmp(pa.raw_data(), b->flat_parameters().raw_data(), pa.nbytes()), 0);
}

TEST(WeightsFileTest, NonFiniteRefusedNamingTheTensor) {
  const std::string path = std::string(::testing::TempDir()) + "/nan.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> a = Make("resnet18", 1);
  a->parameters().back()->value.data<float>()[0] = std::nanf("");
  const std::string last = a->parameters().back()->name;
  const Status saved = SaveWeightsFile(path, *a, ctx, "resnet18");
  EXPECT_EQ(saved.message(), "--save-weights " + path + ": tensor '" + last + "' holds non-finite values; not written");
  // Written anyway (as another tool might), it is refused at load.
  std::vector<NamedTensor> named;
  for (auto& [name, t] : a->StateDict()) named.push_back({name, t});
  ASSERT_TRUE(WriteSafetensors(path, named, {}).ok());
  const Status loaded = LoadWeightsFile(path, *Make("resnet18", 2), "resnet18", false);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find("--load-weights " + path), std::string::npos) << loaded.message();
  EXPECT_NE(loaded.message().find(last), std::string::npos) << loaded.message();
}

TEST(WeightsFileTest, AnotherModelsFileIsRefused) {
  const std::string path = std::string(::testing::TempDir()) + "/r18.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  ASSERT_TRUE(SaveWeightsFile(path, *Make("resnet18", 1), ctx, "resnet18").ok());
  const Status loaded = LoadWeightsFile(path, *Make("resnet34", 1), "resnet34", false);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message().rfind("--load-weights " + path + ": ", 0), 0u) << loaded.message();
}

}  // namespace
}  // namespace ddp
