// bert-tiny against an independent PyTorch float64 implementation
// (tests/golden/make_bert_golden.py made tests/golden/bert_golden.json): from the
// same start on the same batch (padding, both token types, ignored MLM
// labels), the MLM + NSP loss of 3 AdamW steps and of 3 LAMB steps within
// 1e-6 relative (the bar is 1e-4; measured: 5e-9), and parameters
// after them within 1e-5 (measured: 4e-8); dropout off. The start and the
// batch are rebuilt here from the shared portable generator.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/bert.h"
#include "models/bert_question_answering.h"
#include "runtime/layers/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/testing/portable_random.h"
#include "tests/golden.h"

namespace ddp {
namespace {

using nlohmann::json;
using testing::PortableBits;
using testing::PortableStream;
using testing::PortableUniform;

// make_bert_golden.py's start_value, rounded to f32.
void SetStart(Parameter& p) {
  const uint64_t stream = PortableStream(p.name);
  const bool layer_norm_weight = p.name.find("LayerNorm.weight") != std::string::npos;
  float* w = p.value.data<float>();
  for (int64_t i = 0; i < p.value.numel(); ++i) {
    const double u = PortableUniform(stream, i);
    double value = 0.02 * std::sqrt(3.0) * u;
    if (layer_norm_weight) {
      value = 1.0 + 0.1 * u;
    } else if (p.is_bias_or_norm) {
      value = 0.05 * u;
    }
    w[i] = static_cast<float>(value);
  }
}

// make_bert_golden.py's make_batch.
Batch MakeBatch(int64_t n, int64_t t, int64_t vocab) {
  std::vector<int64_t> ids(n * t), types(n * t, 0), mask(n * t, 1), labels(n * t), nsp(n);
  const uint64_t id_stream = PortableStream("input_ids"), select = PortableStream("mlm_select"),
                 target = PortableStream("mlm_target"), nsp_stream = PortableStream("nsp");
  for (int64_t i = 0; i < n * t; ++i) {
    const int64_t row = i / t, col = i % t;
    if (row == 3 && col >= t - 4) mask[i] = 0;
    ids[i] = mask[i] ? 1 + static_cast<int64_t>(PortableBits(id_stream, i) % static_cast<uint64_t>(vocab - 1)) : 0;
    types[i] = mask[i] && col >= t / 2 ? 1 : 0;
    const bool chosen = mask[i] && PortableBits(select, i) % 100 < 25;
    labels[i] = chosen ? static_cast<int64_t>(PortableBits(target, i) % static_cast<uint64_t>(vocab)) : -100;
  }
  for (int64_t i = 0; i < n; ++i) nsp[i] = static_cast<int64_t>(PortableBits(nsp_stream, i) % 2);
  Batch b;
  b.tensors = {{"input_ids", Tensor::FromVector<int64_t>(ids, {n, t})},
               {"token_type_ids", Tensor::FromVector<int64_t>(types, {n, t})},
               {"attention_mask", Tensor::FromVector<int64_t>(mask, {n, t})},
               {"labels", Tensor::FromVector<int64_t>(labels, {n, t})},
               {"next_sentence_label", Tensor::FromVector<int64_t>(nsp, {n})}};
  return b;
}

// The golden's parameter sums after training, by name.
void ExpectParametersAfter(Model& model, const json& checks) {
  for (const auto& [name, check] : checks.items()) {
    const Parameter* p = nullptr;
    for (const Parameter* q : model.parameters()) {
      if (q->name == name) p = q;
    }
    ASSERT_NE(p, nullptr) << name;
    testing::ExpectParameterSums(p->value, check, name);
  }
}

class BertGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BertGoldenTest, FollowsPyTorchLossesAndParameters) {
  const json golden = testing::ReadGolden("bert_golden.json");
  const json g = golden["cases"][GetParam()];
  BertConfig config = *BertConfigFor("bert-tiny");
  config.dropout = 0.0f;
  ASSERT_EQ(golden["config"]["vocab"].get<int64_t>(), config.vocab_size);
  ASSERT_EQ(golden["config"]["hidden"].get<int64_t>(), config.hidden);
  ASSERT_EQ(golden["config"]["layers"].get<int64_t>(), config.layers);
  Model model("bert-tiny", BuildBertForPreTraining(config), 1);
  for (Parameter* p : model.parameters()) SetStart(*p);

  const float weight_decay = golden["weight_decay"].get<float>();
  std::vector<OptimizerSlot> slots;
  int index = 0;
  for (Parameter* p : model.parameters()) {
    slots.push_back({p->name, p->value, p->grad, p->is_bias_or_norm ? 0.0f : weight_decay, index++});
  }
  std::unique_ptr<Optimizer> optimizer;
  if (GetParam() == "adamw") {
    AdamWOptions o;
    o.eps = g["eps"].get<float>();
    optimizer = MakeAdamW(std::move(slots), o);
  } else {
    LambOptions o;
    o.eps = g["eps"].get<float>();
    optimizer = MakeLamb(std::move(slots), o, index);
  }
  const Batch batch = MakeBatch(golden["batch"], golden["seq"], config.vocab_size);
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  const float lr = g["lr"].get<float>();
  for (size_t step = 0; step < g["losses"].size(); ++step) {
    const LossResult r = model.ForwardLoss(ctx, batch);
    const double expected = g["losses"][step].get<double>();
    EXPECT_NEAR(r.loss, expected, 1e-6 * std::fabs(expected)) << "step " << step + 1;
    model.BackwardLoss(ctx, 1.0, false);
    ASSERT_TRUE(optimizer->Step(ctx, lr).ok());
  }
  ExpectParametersAfter(model, g["parameters_after"]);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, BertGoldenTest, ::testing::Values("adamw", "lamb"));

// BertForQuestionAnswering (tests/golden/bert_qa_golden.json): the same
// start and tokens, answer spans with one start and one end past the
// sequence, which the data clamps to it and the loss ignores; 3 AdamW
// steps within 1e-6 relative (the bar is 1e-4), parameters after
// them within 1e-5 (qa_outputs.bias is not compared: its gradient is 0
// but for rounding, see make_bert_golden.py).
TEST(BertQuestionAnsweringGoldenTest, FollowsPyTorchLossesAndParameters) {
  const json golden = testing::ReadGolden("bert_qa_golden.json");
  const json g = golden["question_answering"];
  BertConfig config = *BertConfigFor("bert-tiny");
  config.dropout = 0.0f;
  Model model("bert-tiny", BuildBertForQuestionAnswering(config), 1);
  std::vector<OptimizerSlot> slots;
  int index = 0;
  const float weight_decay = golden["weight_decay"].get<float>();
  for (Parameter* p : model.parameters()) {
    SetStart(*p);
    slots.push_back({p->name, p->value, p->grad, p->is_bias_or_norm ? 0.0f : weight_decay, index++});
  }
  AdamWOptions o;
  o.eps = g["eps"].get<float>();
  std::unique_ptr<Optimizer> optimizer = MakeAdamW(std::move(slots), o);
  const int64_t n = golden["batch"], t = golden["seq"];
  Batch batch = MakeBatch(n, t, config.vocab_size);
  batch.tensors.resize(3);  // the tokens, not pretraining's labels
  for (const char* name : {"start_positions", "end_positions"}) {
    std::vector<int64_t> positions = g[name].get<std::vector<int64_t>>();
    for (int64_t& p : positions) p = std::min(p, t);  // as the data clamps them
    batch.tensors.push_back({name, Tensor::FromVector<int64_t>(positions, {n})});
  }
  ExecutionContext ctx = ExecutionContext::Cpu(2);
  for (size_t step = 0; step < g["losses"].size(); ++step) {
    const LossResult r = model.ForwardLoss(ctx, batch);
    const double expected = g["losses"][step].get<double>();
    EXPECT_NEAR(r.loss, expected, 1e-6 * std::fabs(expected)) << "step " << step + 1;
    model.BackwardLoss(ctx, 1.0, false);
    ASSERT_TRUE(optimizer->Step(ctx, g["lr"].get<float>()).ok());
  }
  ExpectParametersAfter(model, g["parameters_after"]);
}

}  // namespace
}  // namespace ddp
