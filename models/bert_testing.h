// bert-sized test helpers shared by models/bert_test.cc and
// models/bert_question_answering_test.cc: a small configuration and batch,
// central-difference gradient checks, state dict copies. Test sources only.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/bert.h"
#include "runtime/layers/model.h"

namespace ddp::testing {

inline BertConfig Small() {
  BertConfig c;
  c.vocab_size = 13;
  c.hidden = 8;
  c.layers = 2;
  c.heads = 2;
  c.intermediate = 16;
  c.max_positions = 8;
  c.initializer_range = 0.5;  // large enough that every path carries gradient
  c.dropout = 0.0f;
  return c;
}

inline Batch SmallBatch() {
  Batch b;
  const int64_t n = 2, t = 5;
  b.tensors = {
      {"input_ids", Tensor::FromVector<int64_t>({1, 5, 7, 2, 0, 3, 12, 0, 0, 0}, {n, t})},
      {"token_type_ids", Tensor::FromVector<int64_t>({0, 0, 1, 1, 0, 0, 0, 1, 0, 0}, {n, t})},
      {"attention_mask", Tensor::FromVector<int64_t>({1, 1, 1, 1, 0, 1, 1, 1, 0, 0}, {n, t})},
      {"labels", Tensor::FromVector<int64_t>({-100, 4, -100, 9, -100, -100, 6, 11, -100, -100}, {n, t})},
      {"next_sentence_label", Tensor::FromVector<int64_t>({1, 0}, {n})},
  };
  b.step = 3;
  b.first_sample = 4;
  return b;
}

inline std::unique_ptr<Model> MakeModel(const BertConfig& config, uint64_t seed = 7) {
  return std::make_unique<Model>("bert", BuildBertForPreTraining(config), seed);
}

inline double Loss(Model& model, const Batch& batch) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  return model.ForwardLoss(ctx, batch).loss;
}

// Every parameter tensor: three coordinates' analytic gradients against
// central differences of the f32 loss.
inline void CheckGradients(const BertConfig& config, std::unique_ptr<Model> model = nullptr, Batch batch = SmallBatch()) {
  if (model == nullptr) model = MakeModel(config);
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const LossResult r = model->ForwardLoss(ctx, batch);
  ASSERT_TRUE(std::isfinite(r.loss));
  model->BackwardLoss(ctx, 1.0, false);
  const std::vector<float> grads(model->flat_gradients().data<float>(),
                                 model->flat_gradients().data<float>() + model->num_parameters());
  std::mt19937_64 rng(1);
  int64_t offset = 0;
  for (Parameter* p : model->parameters()) {
    const int64_t n = p->value.numel();
    for (int trial = 0; trial < 3; ++trial) {
      int64_t i = static_cast<int64_t>(rng() % n);
      // The word embeddings' padding row (id 0) gets no lookup gradient;
      // check a used row instead, whose tied-decoder gradient adds in.
      if (p->name == "bert.embeddings.word_embeddings.weight" && i < config.hidden) i += 5 * config.hidden;
      float* w = p->value.data<float>() + i;
      const float saved = *w;
      const double h = 2e-3;  // 1e-2 meets the curvature of these large weights
      *w = static_cast<float>(saved + h);
      const double up = Loss(*model, batch);
      *w = static_cast<float>(saved - h);
      const double down = Loss(*model, batch);
      *w = saved;
      const double numerical = (up - down) / (2 * h);
      const double analytic = grads[offset + i];
      EXPECT_NEAR(analytic, numerical, 2e-3 + 3e-2 * std::fabs(numerical)) << p->name << "[" << i << "]";
    }
    offset += n;
  }
}

inline std::vector<std::pair<std::string, Tensor>> Copies(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : state) out.emplace_back(name, t.To(Device::Cpu()).Clone());
  return out;
}

}  // namespace ddp::testing
