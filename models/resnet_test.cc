#include "models/resnet.h"

#include <cstdlib>
#include <map>

#include <gtest/gtest.h>

#include "models/registry.h"
#include "runtime/allocator.h"
#include "runtime/safetensors.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/reference_ops.h"
#include "runtime/testing/temp_path.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::Vec;

std::unique_ptr<Model> Create(const std::string& name, int64_t classes = 1000, bool zero_init = false,
                              uint64_t seed = 1) {
  ModelOptions o;
  o.name = name;
  o.num_classes = classes;
  o.zero_init_residual = zero_init;
  o.seed = seed;
  StatusOr<std::unique_ptr<Model>> m = CreateModel(o);
  CHECK(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

TEST(ResNetTest, ParameterCountsMatchTorchvision) {
  // sum(p.numel() for p in torchvision.models.resnetN().parameters())
  const std::map<std::string, int64_t> expected = {{"resnet18", 11689512}, {"resnet34", 21797672},
                                                   {"resnet50", 25557032}, {"resnet101", 44549160},
                                                   {"resnet152", 60192808}};
  for (const auto& [name, count] : expected) EXPECT_EQ(Create(name)->num_parameters(), count) << name;
  EXPECT_EQ(Create("resnet50", 10)->num_parameters(), 25557032 - 2049 * 990);
}

TEST(ResNetTest, StateDictNamesAreTorchvisions) {
  std::unique_ptr<Model> m = Create("resnet50");
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : m->StateDict()) state[name] = t;
  // len(torchvision.models.resnet50().state_dict()) == 320, resnet18's 122.
  EXPECT_EQ(state.size(), 320u);
  EXPECT_EQ(Create("resnet18")->StateDict().size(), 122u);
  EXPECT_EQ(state.at("conv1.weight").shape(), (Shape{64, 3, 7, 7}));
  EXPECT_EQ(state.at("layer1.0.downsample.0.weight").shape(), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(state.at("layer1.0.downsample.1.running_mean").shape(), (Shape{256}));
  // v1.5: the stride-2 conv of a downsampling bottleneck is its 3x3 conv2.
  EXPECT_EQ(state.at("layer2.0.conv2.weight").shape(), (Shape{128, 128, 3, 3}));
  EXPECT_EQ(state.at("layer4.2.bn3.num_batches_tracked").dtype(), DType::kI64);
  EXPECT_EQ(state.at("layer4.2.bn3.num_batches_tracked").ndim(), 0);
  EXPECT_EQ(state.at("fc.weight").shape(), (Shape{1000, 2048}));
  EXPECT_EQ(state.at("fc.bias").shape(), (Shape{1000}));
  EXPECT_EQ(state.count("layer1.0.relu1.weight"), 0u);
}

TEST(ResNetTest, ZeroInitResidualZeroesTheLastBnOfEachBlock) {
  for (const char* name : {"resnet18", "resnet50"}) {
    std::unique_ptr<Model> m = Create(name, 10, /*zero_init=*/true);
    const std::string last = std::string(name) == "resnet18" ? "bn2" : "bn3";
    int zeroed = 0;
    for (Parameter* p : m->parameters()) {
      const bool is_last_bn_weight = p->name.find("." + last + ".weight") != std::string::npos;
      double sum_abs = 0.0;
      for (int64_t i = 0; i < p->value.numel(); ++i) sum_abs += std::fabs(p->value.data<float>()[i]);
      if (is_last_bn_weight) {
        EXPECT_EQ(sum_abs, 0.0) << p->name;
        ++zeroed;
      } else if (p->name.find("bn") != std::string::npos && p->name.find(".weight") != std::string::npos) {
        EXPECT_EQ(sum_abs, static_cast<double>(p->value.numel())) << p->name;  // BN weights start at 1
      }
    }
    EXPECT_EQ(zeroed, std::string(name) == "resnet18" ? 8 : 16) << name;
  }
}

TEST(ResNetTest, UnknownModelListsTheKnownOnes) {
  ModelOptions o;
  o.name = "resnet9000";
  StatusOr<std::unique_ptr<Model>> m = CreateModel(o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "--model 'resnet9000' is unknown; known models: resnet18 resnet34 resnet50 resnet101 resnet152 bert-tiny "
            "bert-base bert-large");
}

TEST(ResNetTest, ForwardBackwardShapesAndHookOrder) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> m = Create("resnet18", 7);
  struct Recorder : GradientReadyHook {
    void MarkGradientReady(Parameter& p) override { names.push_back(p.name); }
    std::vector<std::string> names;
  } hook;
  m->SetGradientReadyHook(&hook);
  std::mt19937_64 rng(3);
  Tensor x = testing::ToF32Tensor(testing::RandomValues(2 * 3 * 64 * 64, rng), {2, 3, 64, 64});
  Tensor y = m->Forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{2, 7}));
  m->Backward(ctx, testing::ToF32Tensor(testing::RandomValues(14, rng), {2, 7}), false);
  std::vector<std::string> expected;
  for (Parameter* p : m->BackwardOrder()) expected.push_back(p->name);
  EXPECT_EQ(hook.names, expected);
  EXPECT_EQ(hook.names.front(), "fc.bias");
  EXPECT_EQ(hook.names.back(), "conv1.weight");
}

// Checkpointed stages change nothing but memory: over two steps (the second
// from updated weights), the same gradients, batch norm running statistics
// and num_batches_tracked bit for bit, gradients finished in the same order,
// and a lower activation peak.
TEST(ResNetTest, CheckpointedStagesKeepResultsAndSaveMemory) {
  std::mt19937_64 rng(5);
  const Tensor x = testing::ToF32Tensor(testing::RandomValues(4 * 3 * 64 * 64, rng), {4, 3, 64, 64});
  const Tensor dy = testing::ToF32Tensor(testing::RandomValues(4 * 7, rng), {4, 7});
  Allocator* host = GetAllocator(Device::Cpu());
  auto run = [&](bool checkpointing, int64_t* peak, std::vector<std::string>* order) {
    ModelOptions o;
    o.name = "resnet18";
    o.num_classes = 7;
    o.seed = 3;
    o.activation_checkpointing = checkpointing;
    std::unique_ptr<Model> m = std::move(CreateModel(o)).value();
    struct Recorder : GradientReadyHook {
      void MarkGradientReady(Parameter& p) override { names->push_back(p.name); }
      std::vector<std::string>* names;
    } hook;
    hook.names = order;
    m->SetGradientReadyHook(&hook);
    ExecutionContext ctx = ExecutionContext::Cpu(2);
    std::vector<float> out;
    *peak = 0;
    for (int step = 0; step < 2; ++step) {
      const int64_t before = host->bytes_in_use();
      host->ResetPeak();
      m->Forward(ctx, x);
      m->Backward(ctx, dy, false);
      *peak = std::max(*peak, host->peak_bytes_in_use() - before);
      const float* g = m->flat_gradients().data<float>();
      out.insert(out.end(), g, g + m->num_parameters());
      float* w = m->flat_parameters().data<float>();
      for (int64_t i = 0; i < m->num_parameters(); ++i) w[i] -= 0.05f * g[i];
    }
    for (const auto& [name, t] : m->StateDict()) {
      if (t.dtype() != DType::kF32) {
        out.push_back(static_cast<float>(t.data<int64_t>()[0]));  // num_batches_tracked
        continue;
      }
      out.insert(out.end(), t.data<float>(), t.data<float>() + t.numel());
    }
    m->SetGradientReadyHook(nullptr);
    return out;
  };
  int64_t plain_peak = 0, checkpointed_peak = 0;
  std::vector<std::string> plain_order, checkpointed_order;
  const std::vector<float> plain = run(false, &plain_peak, &plain_order);
  const std::vector<float> checkpointed = run(true, &checkpointed_peak, &checkpointed_order);
  EXPECT_TRUE(plain == checkpointed) << "gradients or state differ with checkpointed stages";
  EXPECT_EQ(plain_order, checkpointed_order);
  // The stem (full resolution) is not checkpointed: at this size it holds
  // much of the peak.
  EXPECT_LT(checkpointed_peak, plain_peak) << checkpointed_peak << " vs " << plain_peak;
}

// A residual block (with and without a downsample path, basic and
// bottleneck) against float64 finite differences of its reference: the
// identity gradient must join the branch's.
struct BlockCase {
  int64_t in, planes, stride;
  bool bottleneck;
};

void PrintTo(const BlockCase& c, std::ostream* os) {
  *os << (c.bottleneck ? "bottleneck" : "basic") << c.in << "->" << c.planes << "/" << c.stride;
}

class ResidualBlockTest : public ::testing::TestWithParam<BlockCase> {};

TEST_P(ResidualBlockTest, GradientsMatchFiniteDifferences) {
  const BlockCase c = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  Model model("block", std::make_unique<ResidualBlock>(c.in, c.planes, c.stride, c.bottleneck, false), 1);
  model.set_needs_input_grad(true);
  const Shape xs = {2, c.in, 5, 5};
  std::mt19937_64 rng(4);
  std::vector<Vec> inputs = {testing::RandomValues(NumElements(xs), rng)};
  std::vector<Parameter*> params = model.parameters();
  for (Parameter* p : params) {
    Vec v = testing::RandomValues(p->value.numel(), rng, -0.8, 0.8);
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] = static_cast<float>(v[i]);
    inputs.push_back(v);
  }
  auto reference = [&](const std::vector<Vec>& in) {
    // Parameters arrive in registration order: conv/bn pairs, then the
    // downsample's conv and bn.
    size_t k = 1;
    Shape s = xs;
    Vec h = in[0];
    const int convs = c.bottleneck ? 3 : 2;
    for (int i = 0; i < convs; ++i) {
      Parameter* w = params[k - 1];
      testing::RefConv2dParams p;
      const int64_t kernel = w->shape[2];
      p.pad_h = p.pad_w = kernel / 2;
      const bool strided = c.bottleneck ? i == 1 : i == 0;
      p.stride_h = p.stride_w = strided ? c.stride : 1;
      h = testing::RefConv2d(h, s, in[k], w->shape, {}, p, &s);
      h = testing::RefBatchNormTraining(h, s, in[k + 1], in[k + 2], 1e-5);
      if (i + 1 < convs) h = testing::RefRelu(h);
      k += 3;
    }
    Vec identity = in[0];
    if (k < in.size()) {
      testing::RefConv2dParams p;
      p.stride_h = p.stride_w = c.stride;
      Shape ds;
      identity = testing::RefConv2d(in[0], xs, in[k], params[k - 1]->shape, {}, p, &ds);
      identity = testing::RefBatchNormTraining(identity, ds, in[k + 1], in[k + 2], 1e-5);
    }
    return testing::RefRelu(testing::RefAdd(h, identity));
  };
  Tensor y = model.Forward(ctx, testing::ToF32Tensor(inputs[0], xs));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(y), reference(inputs), 1e-4, 1e-5));
  const Vec dy = testing::RandomValues(y.numel(), rng);
  Tensor dx = model.Backward(ctx, testing::ToF32Tensor(dy, y.shape()), false);
  std::vector<Vec> analytic = {testing::ToDoubles(dx)};
  for (Parameter* p : params) analytic.push_back(testing::ToDoubles(p->grad));
  EXPECT_TRUE(testing::GradientChecker().Check(reference, inputs, dy, analytic));
}

INSTANTIATE_TEST_SUITE_P(Blocks, ResidualBlockTest,
                         ::testing::Values(BlockCase{4, 4, 1, false}, BlockCase{3, 5, 2, false},
                                           BlockCase{8, 2, 1, true}, BlockCase{4, 3, 2, true},
                                           BlockCase{6, 3, 1, true}));

TEST(ResNetTest, WholeModelRoundTripsThroughSafetensors) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> a = Create("resnet18", 10, false, 1), b = Create("resnet18", 10, false, 2);
  // Train one step so running statistics and num_batches_tracked move.
  std::mt19937_64 rng(5);
  Tensor x = testing::ToF32Tensor(testing::RandomValues(2 * 3 * 32 * 32, rng), {2, 3, 32, 32});
  a->Forward(ctx, x);
  const std::string path = testing::TempPath("resnet18.safetensors");
  std::vector<NamedTensor> named;
  for (auto& [name, t] : a->StateDict()) named.push_back({name, t});
  ASSERT_TRUE(WriteSafetensors(path, named).ok());
  StatusOr<SafetensorsContents> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  std::vector<std::pair<std::string, Tensor>> loaded;
  for (NamedTensor& t : read->tensors) loaded.emplace_back(t.name, t.tensor);
  ASSERT_TRUE(b->LoadStateDict(loaded).ok());
  const auto sa = a->StateDict(), sb = b->StateDict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    ASSERT_EQ(sa[i].second.nbytes(), sb[i].second.nbytes());
    EXPECT_EQ(std::memcmp(sa[i].second.raw_data(), sb[i].second.raw_data(), sa[i].second.nbytes()), 0)
        << sa[i].first;
  }
  EXPECT_EQ(b->StateDict()[5].first, "bn1.num_batches_tracked");
  EXPECT_EQ(b->StateDict()[5].second.data<int64_t>()[0], 1);
  a->SetTraining(false);
  b->SetTraining(false);
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(a->Forward(ctx, x)), testing::ToDoubles(b->Forward(ctx, x)), 0.0,
                                0.0));
}

}  // namespace
}  // namespace ddp
