// Layers composed into a model: gradients of every parameter and the input
// against float64 finite differences of the same composition of reference
// ops; backward order, the gradient-ready hook, accumulation, state dicts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/ops/elementwise.h"
#include "runtime/ops/loss.h"

#include "runtime/layers/batch_norm_layer.h"
#include "runtime/layers/classification_loss.h"
#include "runtime/layers/conv2d_layer.h"
#include "runtime/layers/dropout_site.h"
#include "runtime/layers/linear_layer.h"
#include "runtime/layers/model.h"
#include "runtime/layers/sequential.h"
#include "runtime/layers/simple_layers.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/reference_ops.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::Vec;

// conv(3->4, 3x3, pad 1, bias) -> bn -> relu -> maxpool(2, 2) -> conv(4->6, 3x3,
// stride 2) -> bn -> relu -> global avg pool -> linear(6->5).
std::unique_ptr<Model> SmallNet() {
  auto net = std::make_unique<Sequential>();
  Conv2dLayerOptions c1;
  c1.in_channels = 3;
  c1.out_channels = 4;
  c1.kernel = 3;
  c1.padding = 1;
  c1.bias = true;
  net->Append<Conv2dLayer>(c1);
  net->Append<BatchNormLayer>(4);
  net->Append<ReluLayer>();
  net->Append<MaxPoolLayer>(2, 2, 0);
  Conv2dLayerOptions c2;
  c2.in_channels = 4;
  c2.out_channels = 6;
  c2.kernel = 3;
  c2.stride = 2;
  c2.padding = 1;
  net->Append<Conv2dLayer>(c2);
  net->Append<BatchNormLayer>(6);
  net->Append<ReluLayer>();
  net->Append<GlobalAvgPoolLayer>();
  net->Append<LinearLayer>(6, 5);
  return std::make_unique<Model>("small", std::move(net), 5);
}

const Shape kInput = {3, 3, 8, 8};

// The same network from float64 reference ops. in[0] is the input, then the
// parameters in registration order.
Vec Reference(const std::vector<Vec>& in) {
  Shape s;
  testing::RefConv2dParams c1;
  c1.pad_h = c1.pad_w = 1;
  Vec h = testing::RefConv2d(in[0], kInput, in[1], {4, 3, 3, 3}, in[2], c1, &s);
  h = testing::RefRelu(testing::RefBatchNormTraining(h, s, in[3], in[4], 1e-5));
  testing::RefPoolParams pool;
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  h = testing::RefMaxPool2d(h, s, pool, &s);
  testing::RefConv2dParams c2;
  c2.stride_h = c2.stride_w = 2;
  c2.pad_h = c2.pad_w = 1;
  h = testing::RefConv2d(h, s, in[5], {6, 4, 3, 3}, {}, c2, &s);
  h = testing::RefRelu(testing::RefBatchNormTraining(h, s, in[6], in[7], 1e-5));
  h = testing::RefGlobalAvgPool(h, s);
  return testing::RefLinear(h, {s[0], s[1]}, in[8], {5, 6}, in[9]);
}

class RecordingHook : public GradientReadyHook {
 public:
  void MarkGradientReady(Parameter& p) override { names.push_back(p.name); }
  std::vector<std::string> names;
};

TEST(LayersTest, GradientsMatchFiniteDifferencesOfTheReferenceComposition) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> model = SmallNet();
  model->set_needs_input_grad(true);
  std::mt19937_64 rng(9);
  std::vector<Vec> inputs = {testing::RandomValues(NumElements(kInput), rng)};
  for (Parameter* p : model->parameters()) {
    // Random values (BN weights included) so no gradient is trivially zero.
    Vec v = testing::RandomValues(p->value.numel(), rng, -0.8, 0.8);
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] = static_cast<float>(v[i]);
    inputs.push_back(v);
  }
  ASSERT_EQ(inputs.size(), 10u);
  Tensor y = model->Forward(ctx, testing::ToF32Tensor(inputs[0], kInput));
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(y), Reference(inputs), 1e-4, 1e-5));
  const Vec dy = testing::RandomValues(y.numel(), rng);
  Tensor dx = model->Backward(ctx, testing::ToF32Tensor(dy, y.shape()), /*accumulate=*/false);
  std::vector<Vec> analytic = {testing::ToDoubles(dx)};
  for (Parameter* p : model->parameters()) analytic.push_back(testing::ToDoubles(p->grad));
  EXPECT_TRUE(testing::GradientChecker().Check(Reference, inputs, dy, analytic));
}

TEST(LayersTest, NamesFlatBuffersAndStateDictOrder) {
  std::unique_ptr<Model> model = SmallNet();
  std::vector<std::string> names;
  for (Parameter* p : model->parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "5.weight",
                                             "5.bias", "8.weight", "8.bias"}));
  // Values and gradients are consecutive views into the flat buffers.
  int64_t offset = 0;
  for (Parameter* p : model->parameters()) {
    EXPECT_EQ(p->value.storage(), model->flat_parameters().storage());
    EXPECT_EQ(p->value.byte_offset(), static_cast<size_t>(offset) * 4);
    EXPECT_EQ(p->grad.byte_offset(), static_cast<size_t>(offset) * 4);
    offset += p->value.numel();
  }
  EXPECT_EQ(offset, model->num_parameters());
  std::vector<std::string> state;
  for (const auto& [name, t] : model->StateDict()) state.push_back(name);
  EXPECT_EQ(state, (std::vector<std::string>{
                       "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                       "1.num_batches_tracked", "4.weight", "5.weight", "5.bias", "5.running_mean", "5.running_var",
                       "5.num_batches_tracked", "8.weight", "8.bias"}));
}

TEST(LayersTest, HookFiresInReverseRegistrationOrderOncePerParameter) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> model = SmallNet();
  RecordingHook hook;
  model->SetGradientReadyHook(&hook);
  std::mt19937_64 rng(1);
  Tensor y = model->Forward(ctx, testing::ToF32Tensor(testing::RandomValues(NumElements(kInput), rng), kInput));
  model->Backward(ctx, testing::ToF32Tensor(testing::RandomValues(y.numel(), rng), y.shape()), false);
  std::vector<std::string> expected;
  for (Parameter* p : model->BackwardOrder()) expected.push_back(p->name);
  EXPECT_EQ(hook.names, expected);
}

TEST(LayersTest, AccumulationAddsMicroBatchGradients) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> model = SmallNet();
  std::mt19937_64 rng(2);
  std::vector<Tensor> xs, dys;
  std::vector<Vec> single;
  for (int micro = 0; micro < 2; ++micro) {
    xs.push_back(testing::ToF32Tensor(testing::RandomValues(NumElements(kInput), rng), kInput));
    dys.push_back(testing::ToF32Tensor(testing::RandomValues(15, rng), {3, 5}));
    model->Forward(ctx, xs.back());
    model->Backward(ctx, dys.back(), false);
    single.push_back(testing::ToDoubles(model->flat_gradients()));
  }
  model->Forward(ctx, xs[0]);
  model->Backward(ctx, dys[0], false);
  model->Forward(ctx, xs[1]);
  model->Backward(ctx, dys[1], true);
  Vec expected(single[0].size());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = single[0][i] + single[1][i];
  EXPECT_TRUE(testing::AllClose(testing::ToDoubles(model->flat_gradients()), expected, 1e-6, 1e-7));
}

// A plain network with an output loss, through the model's batch
// interface (what the trainer calls): the same loss and gradients, bit for
// bit, as its forward, cross-entropy and backward run by hand; the
// device-side variant (a CUDA graph's) gives the same loss; evaluation
// counts top-1 from the same logits.
TEST(LayersTest, OutputLossRunsTheNetworkOnTheBatch) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> model = SmallNet(), by_hand = SmallNet();
  model->set_output_loss(std::make_unique<SoftmaxClassificationLoss>(0.1));
  EXPECT_EQ(model->loss_stats_size(), 3);
  std::mt19937_64 rng(3);
  const Tensor x = testing::ToF32Tensor(testing::RandomValues(NumElements(kInput), rng), kInput);
  const Tensor labels = Tensor::FromVector<int64_t>({1, 4, 0}, {3});
  Batch batch;
  batch.tensors = {{"images", x}, {"labels", labels}};

  const double loss = model->ForwardLoss(ctx, batch).loss;
  model->BackwardLoss(ctx, 0.25, /*accumulate=*/false);

  CrossEntropyParams ce;
  ce.label_smoothing = 0.1;
  const Tensor logits = by_hand->Forward(ctx, x);
  Tensor probs = Tensor::Empty({3, 5}, DType::kF32), dlogits = Tensor::Empty({3, 5}, DType::kF32);
  const double want = SoftmaxCrossEntropyForward(ctx, ce, logits, labels, probs).loss;
  SoftmaxCrossEntropyBackward(ctx, ce, probs, labels, 0.25, dlogits);
  by_hand->Backward(ctx, dlogits, false);
  EXPECT_EQ(loss, want);
  EXPECT_EQ(testing::ToDoubles(model->flat_gradients()), testing::ToDoubles(by_hand->flat_gradients()));

  Tensor stats = Tensor::Zeros({3}, DType::kF64);
  model->ForwardLossToDevice(ctx, batch, stats);
  EXPECT_EQ(model->ReadLoss(ctx, stats, batch).loss, want);

  by_hand->Forward(ctx, x);  // the running statistics' second update, as ForwardLossToDevice made
  model->SetTraining(false);
  by_hand->SetTraining(false);
  const LossResult eval = model->ForwardLoss(ctx, batch);
  const Tensor eval_logits = by_hand->Forward(ctx, x);
  int64_t correct = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const float* row = eval_logits.data<float>() + 5 * i;
    correct += std::max_element(row, row + 5) - row == labels.data<int64_t>()[i];
  }
  ASSERT_EQ(eval.counts.size(), 1u);
  EXPECT_EQ(eval.counts[0].counted, 3);
  EXPECT_EQ(eval.counts[0].correct, correct);
  EXPECT_EQ(eval.counts[0].label, "accuracy");
}

TEST(LayersTest, LoadStateDictIsStrictAndNamesTheTensor) {
  std::unique_ptr<Model> a = SmallNet(), b = SmallNet();
  auto state = a->StateDict();
  state[0].second = Tensor::Zeros(state[0].second.shape(), DType::kF32);
  ASSERT_TRUE(b->LoadStateDict(state).ok());
  EXPECT_EQ(b->parameters()[0]->value.data<float>()[0], 0.0f);

  auto missing = state;
  missing.erase(missing.begin() + 4);
  Status s = b->LoadStateDict(missing);
  EXPECT_EQ(s.message(), "missing tensor '1.running_mean' that small needs");
  auto extra = state;
  extra.emplace_back("head.weight", Tensor::Zeros({1}, DType::kF32));
  EXPECT_EQ(b->LoadStateDict(extra).message(), "unexpected tensor 'head.weight' that small lacks");
  auto wrong = state;
  wrong[13].second = Tensor::Zeros({5, 7}, DType::kF32);
  EXPECT_EQ(b->LoadStateDict(wrong).message(), "tensor '8.weight' is f32[5, 7], small expects f32[5, 6]");
  auto wrong_dtype = state;
  wrong_dtype[6].second = Tensor::Zeros({}, DType::kF32);
  EXPECT_EQ(b->LoadStateDict(wrong_dtype).message(),
            "tensor '1.num_batches_tracked' is f32[], small expects i64[]");
}

// The low-precision copy with channels-last weights: each 4-D weight's copy
// is its [K, R, S, C] rearrangement, rounded; the rest are plain casts; a
// partial refresh converts the weights it covers and leaves the others.
TEST(LayersTest, LowPrecisionCopyRearrangesFourDimensionalWeights) {
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  std::unique_ptr<Model> model = SmallNet();
  model->EnableLowPrecision(ctx, DType::kBF16, MemoryFormat::kChannelsLast);
  auto expect_copy_of = [&](const Parameter& p) {
    ASSERT_EQ(p.low.channels_last(), p.shape.size() == 4) << p.name;
    Tensor low_nchw = Tensor::Empty(p.shape, DType::kF32);
    if (p.low.channels_last()) {
      ConvertLayout(ctx, p.low, low_nchw);
    } else {
      CastScaled(ctx, p.low, 1.0f, low_nchw);
    }
    const Vec got = testing::ToDoubles(low_nchw), master = testing::ToDoubles(p.value);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], BFloat16ToFloat(FloatToBFloat16(static_cast<float>(master[i])))) << p.name << " " << i;
    }
  };
  for (const Parameter* p : model->parameters()) expect_copy_of(*p);

  // New master values; refresh only "4.weight" (the second convolution's).
  std::mt19937_64 rng(3);
  for (Parameter* p : model->parameters()) {
    const Vec v = testing::RandomValues(p->value.numel(), rng);
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] = static_cast<float>(v[i]);
  }
  int64_t offset = 0;
  Parameter* conv2 = nullptr;
  for (Parameter* p : model->parameters()) {
    if (p->name == "4.weight") {
      conv2 = p;
      break;
    }
    offset += p->value.numel();
  }
  ASSERT_NE(conv2, nullptr);
  model->RefreshLowPrecision(ctx, offset, conv2->value.numel());
  expect_copy_of(*conv2);
  Tensor stale = Tensor::Empty(model->parameters()[0]->shape, DType::kF32);
  ConvertLayout(ctx, model->parameters()[0]->low, stale);
  EXPECT_NE(testing::ToDoubles(stale)[0],
            BFloat16ToFloat(FloatToBFloat16(model->parameters()[0]->value.data<float>()[0])))
      << "outside the refreshed range, the copy is left as it was";
  model->RefreshLowPrecision(ctx);
  for (const Parameter* p : model->parameters()) expect_copy_of(*p);
  EXPECT_DEATH(model->RefreshLowPrecision(ctx, offset + 1, 4), "cover rearranged weights whole");
}

TEST(DropoutSiteTest, MaskFollowsTheGlobalSampleAndBackwardDrawsItAgain) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  StepState state;
  state.batch = 4;
  state.step = 3;
  state.seed = 11;
  state.dropout = 0.5f;
  std::vector<float> ones(4 * 6, 1.0f);
  const Tensor x = Tensor::FromVector<float>(ones, {4, 6});
  DropoutSite whole(&state, /*site=*/2);
  const Tensor y = whole.Forward(ctx, x);
  int kept = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float v = y.data<float>()[i];
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;  // dropped, or scaled by 1 / (1 - p)
    kept += v != 0.0f;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 24);
  // The same samples split in two micro-batches draw the same masks.
  StepState half = state;
  half.batch = 2;
  DropoutSite part(&half, 2);
  for (int64_t first : {0, 2}) {
    half.first_sample = first;
    const Tensor yp = part.Forward(ctx, x.View(first * 6, {2, 6}));
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(yp.data<float>()[i], y.data<float>()[first * 6 + i]);
  }
  // Backward: the forward's mask and scale, drawn again from what the
  // forward was keyed by, though the step state has moved on since.
  state.step = 4;
  state.first_sample = 8;
  const Tensor dy = Tensor::FromVector<float>(std::vector<float>(24, 3.0f), {4, 6});
  const Tensor dx = whole.Backward(ctx, dy);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(dx.data<float>()[i], y.data<float>()[i] * 3.0f);
  EXPECT_EQ(whole.Backward(ctx, dy).raw_data(), dy.raw_data()) << "one backward a forward";
  state.step = 3;
  state.first_sample = 0;
  // Another site or step draws another mask; p = 0 passes x through.
  DropoutSite other(&state, 3);
  const Tensor yo = other.Forward(ctx, x);
  EXPECT_NE(std::vector<float>(yo.data<float>(), yo.data<float>() + 24),
            std::vector<float>(y.data<float>(), y.data<float>() + 24));
  state.dropout = 0.0f;
  EXPECT_EQ(whole.Forward(ctx, x).raw_data(), x.raw_data());
}

}  // namespace
}  // namespace ddp
