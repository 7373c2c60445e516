// BertForPreTraining on the CPU: Hugging Face's parameter names, order and
// count (bert-base's 110,106,428 is BertForPreTraining's, the decoder tied to
// the word embeddings); gradients finished in the reverse of registration
// (the Reducer's static bucket order) with the tied decoder's gradient in
// the word embeddings'; every parameter's gradient against central
// differences of the loss, with padding, ignored MLM labels and dropout on;
// and accumulation adding micro-batches' gradients.
#include "models/bert.h"
#include "models/bert_question_answering.h"
#include "runtime/data/token_dataset.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/bert_testing.h"
#include "runtime/allocator.h"
#include "runtime/layers/model.h"

namespace ddp {
namespace {

using testing::CheckGradients;
using testing::Copies;
using testing::Loss;
using testing::MakeModel;
using testing::Small;
using testing::SmallBatch;

TEST(BertTest, BaseHasHuggingFaceNamesAndCount) {
  BertConfig base = *BertConfigFor("bert-base");
  std::unique_ptr<Model> model = MakeModel(base);
  EXPECT_EQ(model->num_parameters(), 110106428);
  const std::vector<Parameter*>& p = model->parameters();
  ASSERT_EQ(p.size(), 5u + 12u * 16u + 2u + 5u + 2u);
  EXPECT_EQ(p[0]->name, "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(p[1]->name, "bert.embeddings.position_embeddings.weight");
  EXPECT_EQ(p[2]->name, "bert.embeddings.token_type_embeddings.weight");
  EXPECT_EQ(p[3]->name, "bert.embeddings.LayerNorm.weight");
  EXPECT_EQ(p[4]->name, "bert.embeddings.LayerNorm.bias");
  const std::vector<std::string> layer0 = {
      "attention.self.query.weight",    "attention.self.query.bias",        "attention.self.key.weight",
      "attention.self.key.bias",        "attention.self.value.weight",      "attention.self.value.bias",
      "attention.output.dense.weight",  "attention.output.dense.bias",      "attention.output.LayerNorm.weight",
      "attention.output.LayerNorm.bias", "intermediate.dense.weight",       "intermediate.dense.bias",
      "output.dense.weight",            "output.dense.bias",                "output.LayerNorm.weight",
      "output.LayerNorm.bias"};
  for (size_t i = 0; i < layer0.size(); ++i) EXPECT_EQ(p[5 + i]->name, "bert.encoder.layer.0." + layer0[i]);
  EXPECT_EQ(p[5 + 16 * 11]->name, "bert.encoder.layer.11.attention.self.query.weight");
  const std::vector<std::string> tail = {"bert.pooler.dense.weight",
                                         "bert.pooler.dense.bias",
                                         "cls.predictions.bias",
                                         "cls.predictions.transform.dense.weight",
                                         "cls.predictions.transform.dense.bias",
                                         "cls.predictions.transform.LayerNorm.weight",
                                         "cls.predictions.transform.LayerNorm.bias",
                                         "cls.seq_relationship.weight",
                                         "cls.seq_relationship.bias"};
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(p[p.size() - tail.size() + i]->name, tail[i]);
  EXPECT_EQ(p[0]->shape, (Shape{30522, 768}));
  EXPECT_EQ(p.back()->shape, (Shape{2}));
  // No decay for biases and LayerNorm weights (NVIDIA's recipe); embeddings
  // and dense weights decay.
  for (const Parameter* q : p) {
    const bool norm_or_bias = q->name.find("LayerNorm") != std::string::npos ||
                              (q->name.size() >= 4 && q->name.compare(q->name.size() - 4, 4, "bias") == 0);
    EXPECT_EQ(q->is_bias_or_norm, norm_or_bias) << q->name;
  }
}

TEST(BertTest, ConfigsByName) {
  EXPECT_EQ(BertConfigFor("bert-tiny")->layers, 2);
  EXPECT_EQ(BertConfigFor("bert-tiny")->hidden, 128);
  EXPECT_EQ(BertConfigFor("bert-large")->heads, 16);
  EXPECT_EQ(BertConfigFor("bert-huge").status().message(),
            "unknown BERT model 'bert-huge'; use bert-tiny, bert-base or bert-large");
}

class OrderRecorder : public GradientReadyHook {
 public:
  void MarkGradientReady(Parameter& param) override { order.push_back(&param); }
  std::vector<Parameter*> order;
};

TEST(BertTest, GradientsFinishInReverseRegistrationOrder) {
  std::unique_ptr<Model> model = MakeModel(Small());
  OrderRecorder recorder;
  model->SetGradientReadyHook(&recorder);
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  model->ForwardLoss(ctx, SmallBatch());
  model->BackwardLoss(ctx, 1.0, false);
  EXPECT_EQ(recorder.order, model->BackwardOrder());
  model->SetGradientReadyHook(nullptr);
}

TEST(BertTest, EveryParameterGradientMatchesFiniteDifferences) { CheckGradients(Small()); }

TEST(BertTest, GradientsWithDropoutMatchFiniteDifferences) {
  BertConfig c = Small();
  c.dropout = 0.2f;  // the masks are a function of the step: the same at w + h and w - h
  CheckGradients(c);
}

Batch ClassificationBatch() {
  Batch b = SmallBatch();
  b.tensors.pop_back();  // no next_sentence_label
  b.tensors.back().second = Tensor::FromVector<int64_t>({2, 0}, {2});  // a class per sequence
  return b;
}

TEST(BertTest, ClassifierGradientsMatchFiniteDifferences) {
  BertConfig c = Small();
  c.dropout = 0.2f;
  CheckGradients(c, std::make_unique<Model>("bert", BuildBertForSequenceClassification(c, 3), 7),
                 ClassificationBatch());
}

// classification_loss's device-side path (a CUDA graph's step): the loss
// left in a statistics tensor and read later equals the host loss, and the
// backward that follows gives the same gradients, bit for bit, dropout on.
TEST(BertTest, ClassifierDeviceSideLossEqualsTheHostLoss) {
  BertConfig c = Small();
  c.dropout = 0.2f;
  Model host("bert", BuildBertForSequenceClassification(c, 3), 7);
  Model device("bert", BuildBertForSequenceClassification(c, 3), 7);
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const Batch batch = ClassificationBatch();
  const double want = host.ForwardLoss(ctx, batch).loss;
  host.BackwardLoss(ctx, 0.5, /*accumulate=*/false);

  ASSERT_EQ(device.loss_stats_size(), 3);
  Tensor stats = Tensor::Zeros({3}, DType::kF64);
  device.ForwardLossToDevice(ctx, batch, stats);
  EXPECT_EQ(device.ReadLoss(ctx, stats, batch).loss, want);
  EXPECT_GT(want, 0.0);
  device.BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  const Tensor& a = host.flat_gradients();
  const Tensor& b = device.flat_gradients();
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
  double norm = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) norm += std::abs(a.data<float>()[i]);
  EXPECT_GT(norm, 0.0);
}

// Pretraining with the data source's mlm_positions (padded rows per
// sequence): the same loss as a batch whose labels are read here, the
// device-side loss equal to the host loss and the gradients after it the
// host's, bit for bit.
TEST(BertTest, PretrainingDeviceSideLossFromTheDataSourcesPositions) {
  Batch batch = SmallBatch();
  const int64_t n = 2, t = 5, per = 3;  // at most 2 labels a sequence here; one more row of padding
  std::vector<int64_t> rows(n * per), targets(n * per);
  FindMlmPositions(batch.Get("labels").data<int64_t>(), n, t, per, rows.data(), targets.data());
  EXPECT_EQ(rows, (std::vector<int64_t>{1, 3, 0, 6, 7, 5}));
  EXPECT_EQ(targets, (std::vector<int64_t>{4, 9, -100, 6, 11, -100}));
  Batch found = batch;
  found.tensors.push_back({"mlm_positions", Tensor::FromVector<int64_t>(rows, {n * per})});
  found.tensors.push_back({"mlm_labels", Tensor::FromVector<int64_t>(targets, {n * per})});
  std::unique_ptr<Model> host = MakeModel(Small()), device = MakeModel(Small());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  // The padding rows change no figure: loss and gradients equal the
  // unpadded rows' but for the GEMMs' summation lengths.
  const double scanned = host->ForwardLoss(ctx, batch).loss;
  host->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  const Tensor unpadded = host->flat_gradients().Clone();
  const double want = host->ForwardLoss(ctx, found).loss;
  EXPECT_NEAR(want, scanned, 1e-6 * std::fabs(scanned));
  host->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  for (int64_t i = 0; i < unpadded.numel(); ++i) {
    const float u = unpadded.data<float>()[i], p = host->flat_gradients().data<float>()[i];
    ASSERT_NEAR(p, u, 1e-6f + 1e-5f * std::fabs(u)) << "gradient element " << i;
  }
  Tensor stats = Tensor::Zeros({6}, DType::kF64);
  device->ForwardLossToDevice(ctx, found, stats);
  EXPECT_EQ(device->ReadLoss(ctx, stats, found).loss, want);
  EXPECT_EQ(stats.data<double>()[1], 4.0);  // masked tokens counted
  device->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  const Tensor& a = host->flat_gradients();
  const Tensor& b = device->flat_gradients();
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
}

// A captured step would replay its first masks: dropout blocks capture,
// naming the flag; without dropout nothing does.
TEST(BertTest, DropoutBlocksGraphCapture) {
  BertConfig c = Small();
  Model plain("bert", BuildBertForSequenceClassification(c, 3), 7);
  EXPECT_EQ(plain.CaptureBlocker(), "");
  c.dropout = 0.1f;
  Model with_dropout("bert", BuildBertForSequenceClassification(c, 3), 7);
  EXPECT_NE(with_dropout.CaptureBlocker().find("dropout masks are keyed by the step"), std::string::npos);
  EXPECT_NE(with_dropout.CaptureBlocker().find("--dropout 0"), std::string::npos);
  EXPECT_EQ(MakeModel(Small())->loss_stats_size(), 6);  // pretraining's loss stays on the device too
}

TEST(BertTest, ClassifierFineTunesFromPretrainingWeights) {
  std::unique_ptr<Model> pretrained = MakeModel(Small(), 1);
  const auto file = Copies(pretrained->StateDict());
  Model classifier("bert", BuildBertForSequenceClassification(Small(), 3), 2);
  EXPECT_EQ(classifier.parameters().back()->name, "classifier.bias");
  Model::LoadReport report;
  ASSERT_TRUE(classifier.LoadStateDict(file, &report).ok());
  EXPECT_EQ(report.fresh, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  ASSERT_EQ(report.dropped.size(), 9u);  // cls.predictions.* (the tied decoder too) and cls.seq_relationship.*
  for (const std::string& name : report.dropped) EXPECT_EQ(name.rfind("cls.", 0), 0u) << name;
  for (size_t i = 0; i + 2 < classifier.parameters().size(); ++i) {  // bert.*, as saved
    const Parameter* p = classifier.parameters()[i];
    EXPECT_EQ(p->name, pretrained->parameters()[i]->name);
    EXPECT_EQ(std::memcmp(p->value.raw_data(), pretrained->parameters()[i]->value.raw_data(), p->value.nbytes()), 0)
        << p->name;
  }
  // Anything else missing is still an error naming it.
  std::vector<std::pair<std::string, Tensor>> incomplete;
  for (const auto& entry : file) {
    if (entry.first != "bert.pooler.dense.bias") incomplete.push_back(entry);
  }
  EXPECT_EQ(classifier.LoadStateDict(incomplete).message(), "missing tensor 'bert.pooler.dense.bias' that bert needs");
}

// Recomputing each layer in backward changes nothing but memory: the same
// loss and gradients bit for bit, dropout on, and a lower activation peak.
TEST(BertTest, ActivationCheckpointingKeepsGradientsAndSavesMemory) {
  BertConfig c = Small();
  c.hidden = 32;
  c.intermediate = 128;
  c.layers = 4;
  c.max_positions = 64;
  c.dropout = 0.1f;
  Batch batch;
  const int64_t n = 4, t = 48;
  std::vector<int64_t> ids(n * t), labels(n * t, -100), mask(n * t, 1);
  for (int64_t i = 0; i < n * t; ++i) ids[i] = 1 + i % 12;
  for (int64_t i = 0; i < n * t; i += 7) labels[i] = (i * 5) % 13;
  for (int64_t i = t - 5; i < t; ++i) mask[t + i] = 0;
  batch.tensors = {{"input_ids", Tensor::FromVector<int64_t>(ids, {n, t})},
                   {"attention_mask", Tensor::FromVector<int64_t>(mask, {n, t})},
                   {"labels", Tensor::FromVector<int64_t>(labels, {n, t})},
                   {"next_sentence_label", Tensor::FromVector<int64_t>({0, 1, 1, 0}, {n})}};
  batch.step = 2;
  Allocator* host = GetAllocator(Device::Cpu());
  auto run = [&](bool checkpointing, int64_t* activation_peak) {
    BertConfig config = c;
    config.activation_checkpointing = checkpointing;
    std::unique_ptr<Model> model = MakeModel(config);
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    const int64_t before = host->bytes_in_use();
    host->ResetPeak();
    const double loss = model->ForwardLoss(ctx, batch).loss;
    model->BackwardLoss(ctx, 1.0, false);
    *activation_peak = host->peak_bytes_in_use() - before;
    const float* g = model->flat_gradients().data<float>();
    std::vector<float> result(g, g + model->num_parameters());
    result.push_back(static_cast<float>(loss));
    return result;
  };
  int64_t plain_peak = 0, checkpointed_peak = 0;
  const std::vector<float> plain = run(false, &plain_peak);
  const std::vector<float> checkpointed = run(true, &checkpointed_peak);
  EXPECT_TRUE(plain == checkpointed) << "gradients or loss differ with checkpointing";
  EXPECT_LT(checkpointed_peak, plain_peak * 2 / 3) << checkpointed_peak << " vs " << plain_peak;
}

TEST(BertTest, DropoutMasksFollowStepAndSample) {
  BertConfig c = Small();
  c.dropout = 0.3f;
  std::unique_ptr<Model> model = MakeModel(c);
  Batch batch = SmallBatch();
  const double first = Loss(*model, batch);
  EXPECT_EQ(Loss(*model, batch), first);  // a pure function of the step and samples
  batch.step = 4;
  EXPECT_NE(Loss(*model, batch), first);
  model->SetTraining(false);  // no dropout in evaluation
  const double eval = Loss(*model, batch);
  batch.step = 9;
  EXPECT_EQ(Loss(*model, batch), eval);
}

TEST(BertTest, AccumulationAddsMicroBatchGradients) {
  std::unique_ptr<Model> model = MakeModel(Small());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Batch a = SmallBatch(), b = SmallBatch();
  b.tensors[0].second = Tensor::FromVector<int64_t>({4, 4, 8, 2, 0, 3, 1, 6, 9, 0}, {2, 5});
  auto gradients = [&](const std::vector<const Batch*>& micro) {
    for (size_t m = 0; m < micro.size(); ++m) {
      model->ForwardLoss(ctx, *micro[m]);
      model->BackwardLoss(ctx, 1.0, m > 0);
    }
    const float* g = model->flat_gradients().data<float>();
    return std::vector<double>(g, g + model->num_parameters());
  };
  const std::vector<double> ga = gradients({&a}), gb = gradients({&b}), both = gradients({&a, &b});
  for (size_t i = 0; i < both.size(); ++i) ASSERT_NEAR(both[i], ga[i] + gb[i], 1e-6 + 1e-5 * std::fabs(both[i])) << i;
}

TEST(BertTest, CountsMaskedTokensAndPairs) {
  std::unique_ptr<Model> model = MakeModel(Small());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  // Training leaves them out (they read the logits on the host).
  EXPECT_TRUE(model->ForwardLoss(ctx, SmallBatch()).counts.empty());
  model->SetTraining(false);
  const LossResult r = model->ForwardLoss(ctx, SmallBatch());
  ASSERT_EQ(r.counts.size(), 2u);
  EXPECT_EQ(r.counts[0].name, "mlm");
  EXPECT_EQ(r.counts[0].counted, 4);
  EXPECT_EQ(r.counts[1].name, "nsp");
  EXPECT_EQ(r.counts[1].counted, 2);
}

// The state dict's names, order and shapes are Hugging Face's
// BertForPreTraining.state_dict(), tied decoder included, and
// BertForQuestionAnswering's (no pooler; qa_outputs)
// (tests/golden/make_bert_manifest.py wrote the manifest).
TEST(BertTest, StateDictMatchesTheHuggingFaceManifest) {
  std::ifstream in("tests/golden/bert_state_dict_manifest.json");
  ASSERT_TRUE(in) << "tests/golden/bert_state_dict_manifest.json missing";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  for (const std::string name : {"bert-tiny", "bert-base", "bert-tiny question-answering",
                                  "bert-base question-answering"}) {
    SCOPED_TRACE(name);
    const bool qa = name.find(' ') != std::string::npos;
    BertConfig config = *BertConfigFor(name.substr(0, name.find(' ')));
    std::unique_ptr<Model> model =
        qa ? std::make_unique<Model>("bert", BuildBertForQuestionAnswering(config), 7) : MakeModel(config);
    const auto state = model->StateDict();
    ASSERT_TRUE(manifest["models"].contains(name));
    const nlohmann::json& expected = manifest["models"][name];
    ASSERT_EQ(state.size(), expected.size());
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_EQ(state[i].first, expected[i][0].get<std::string>()) << i;
      EXPECT_EQ(state[i].second.shape(), expected[i][1].get<Shape>()) << state[i].first;
    }
  }
}


TEST(BertTest, LoadsWithOrWithoutTiedDuplicatesAndOlderNames) {
  std::unique_ptr<Model> source = MakeModel(Small(), 1);
  const auto saved = Copies(source->StateDict());  // with the tied decoder, as BertForPreTraining saves
  ASSERT_EQ(saved.size(), source->parameters().size() + 2);
  auto loaded_equals_source = [&](const std::vector<std::pair<std::string, Tensor>>& file) {
    std::unique_ptr<Model> target = MakeModel(Small(), 2);
    const Status s = target->LoadStateDict(file);
    if (!s.ok()) return ::testing::AssertionFailure() << s.message();
    const float* a = target->flat_parameters().data<float>();
    const float* b = source->flat_parameters().data<float>();
    for (int64_t i = 0; i < source->num_parameters(); ++i) {
      if (a[i] != b[i]) return ::testing::AssertionFailure() << "parameter element " << i << " differs";
    }
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(loaded_equals_source(saved));
  // Hugging Face's safetensors files leave the tied duplicates out.
  std::vector<std::pair<std::string, Tensor>> untied;
  for (const auto& entry : saved) {
    if (entry.first.rfind("cls.predictions.decoder.", 0) != 0) untied.push_back(entry);
  }
  EXPECT_TRUE(loaded_equals_source(untied));
  // Older files: LayerNorm gamma/beta, and the position_ids buffer.
  std::vector<std::pair<std::string, Tensor>> older;
  for (auto [name, t] : untied) {
    const size_t at = name.find("LayerNorm.");
    if (at != std::string::npos) name = name.substr(0, at) + (name.back() == 't' ? "LayerNorm.gamma" : "LayerNorm.beta");
    older.emplace_back(name, t);
  }
  older.emplace_back("bert.embeddings.position_ids", Tensor::Zeros({1, 8}, DType::kI64));
  EXPECT_TRUE(loaded_equals_source(older));
  // A "tied" duplicate that is not a copy is refused by name.
  std::vector<std::pair<std::string, Tensor>> broken = saved;
  for (auto& [name, t] : broken) {
    if (name == "cls.predictions.decoder.bias") t.data<float>()[0] += 1.0f;
  }
  std::unique_ptr<Model> target = MakeModel(Small(), 2);
  EXPECT_EQ(target->LoadStateDict(broken).message(),
            "tensor 'cls.predictions.decoder.bias' differs from 'cls.predictions.bias', to which bert ties it");
}

}  // namespace
}  // namespace ddp
