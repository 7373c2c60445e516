// ddp_train against PyTorch: ResNet-18 and ResNet-50 from the same start on
// the same batch follow PyTorch's float64 per-step losses (and parameters
// after 4 SGD steps with momentum), also with gradient accumulation, label
// smoothing, clipping, Nesterov and BN/bias excluded from weight decay. tests/golden/make_resnet_golden.py made the
// golden file; the start is rebuilt here from the shared portable generator.
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launch/trainer.h"
#include "models/registry.h"
#include "runtime/safetensors.h"
#include "runtime/testing/portable_random.h"
#include "runtime/testing/temp_path.h"
#include "tests/golden.h"

namespace ddp {
namespace {

using nlohmann::json;
using testing::PortableBits;
using testing::PortableStream;
using testing::PortableUniform;

json Golden() { return testing::ReadGolden("resnet_golden.json"); }

Tensor PortableTensor(const std::string& stream_name, const Shape& shape, double scale) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  const uint64_t stream = PortableStream(stream_name);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(PortableUniform(stream, i) * scale);
  return t;
}

TEST(PortableRandomTest, MatchesTheGoldenScriptBitForBit) {
  const json check = Golden()["generator_check"];
  const uint64_t stream = PortableStream(check["stream"].get<std::string>());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(PortableUniform(stream, i), check["uniform"][i].get<double>()) << i;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(std::to_string(PortableBits(stream, i)), check["bits"][i].get<std::string>());
}

class ResNetGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ResNetGoldenTest, FollowsPyTorchLossesAndParameters) {
  const std::string case_name = GetParam();
  const json g = Golden()["cases"][case_name];
  const std::string name = g["model"];
  const int64_t batch = g["batch"], accumulation = g["accumulation_steps"], image = g["image_size"],
                classes = g["num_classes"];
  const int64_t samples = batch * accumulation;

  // The start: conv weights uniform with kaiming-normal's variance, fc with
  // PyTorch's default bound, BN as initialized (zero_init_residual).
  ModelOptions model_options;
  model_options.name = name;
  model_options.num_classes = classes;
  model_options.zero_init_residual = true;
  std::unique_ptr<Model> start = std::move(CreateModel(model_options)).value();
  std::vector<NamedTensor> weights;
  int64_t fc_in = 0;
  for (Parameter* p : start->parameters()) {
    if (p->name == "fc.weight") fc_in = p->shape[1];
  }
  for (auto& [tensor_name, t] : start->StateDict()) {
    if (tensor_name.rfind("fc.", 0) == 0) {
      weights.push_back({tensor_name, PortableTensor(tensor_name, t.shape(), 1.0 / std::sqrt(static_cast<double>(fc_in)))});
    } else if (t.ndim() == 4) {
      const double fan_out = static_cast<double>(t.dim(0) * t.dim(2) * t.dim(3));
      weights.push_back({tensor_name, PortableTensor(tensor_name, t.shape(), std::sqrt(6.0 / fan_out))});
    } else {
      weights.push_back({tensor_name, t});
    }
  }
  const std::string weights_path = testing::TempPath(case_name + "_start.safetensors");
  ASSERT_TRUE(WriteSafetensors(weights_path, weights).ok());
  Tensor images = PortableTensor("images", {samples, 3, image, image}, 1.0);
  Tensor labels = Tensor::Empty({samples}, DType::kI64);
  const uint64_t label_stream = PortableStream("labels");
  for (int64_t i = 0; i < samples; ++i) {
    labels.data<int64_t>()[i] = static_cast<int64_t>(PortableBits(label_stream, i) % static_cast<uint64_t>(classes));
  }
  const std::string data_path = testing::TempPath(case_name + "_batch.safetensors");
  ASSERT_TRUE(WriteSafetensors(data_path, {{"images", images}, {"labels", labels}}).ok());

  TrainOptions o;
  o.model = name;
  o.batch_size = batch;
  o.accumulation_steps = accumulation;
  o.label_smoothing = g["label_smoothing"];
  o.clip_grad_norm = g["clip_grad_norm"];
  o.nesterov = g["nesterov"];
  o.decay_bn_bias = g["decay_bn_bias"];
  o.steps = static_cast<int64_t>(g["losses"].size());
  o.threads = 2;
  o.optimizer = "sgd";
  o.lr = o.schedule.base_lr = g["lr"];
  o.momentum = g["momentum"];
  o.weight_decay = g["weight_decay"];
  o.data = "tensors:" + data_path;
  o.shuffle = false;
  o.image_size = image;
  o.num_classes = classes;
  o.zero_init_residual = true;
  o.load_weights = weights_path;
  o.save_weights = testing::TempPath(case_name + "_end.safetensors");
  o.metrics_file = testing::TempPath(case_name + "_metrics.jsonl");
  StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());

  std::ifstream metrics(o.metrics_file);
  std::string line;
  std::vector<double> losses;
  while (std::getline(metrics, line)) {
    const json record = json::parse(line);
    if (record.contains("loss")) losses.push_back(record["loss"]);
  }
  ASSERT_EQ(losses.size(), g["losses"].size());
  double worst = 0.0;
  for (size_t i = 0; i < losses.size(); ++i) {
    const double expected = g["losses"][i];
    const double rel = std::fabs(losses[i] - expected) / std::fabs(expected);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-5) << case_name << " step " << i + 1 << ": " << losses[i] << " vs PyTorch " << expected;
  }
  std::printf("%s: worst relative loss difference from PyTorch (float64) over %zu steps: %.2e\n", case_name.c_str(),
              losses.size(), worst);

  StatusOr<SafetensorsContents> end = ReadSafetensors(o.save_weights);
  ASSERT_TRUE(end.ok());
  for (auto& [param, sums] : g["parameters_after"].items()) {
    const Tensor* t = end->Find(param);
    ASSERT_NE(t, nullptr) << param;
    testing::ExpectParameterSums(*t, sums, param);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ResNetGoldenTest, ::testing::Values("resnet18", "resnet50", "resnet18_options"));

}  // namespace
}  // namespace ddp
