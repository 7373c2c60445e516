// BertForQuestionAnswering on the CPU: gradients against central
// differences (dropout on, a clamped position ignored), the device-side loss
// against the host's, evaluation's best spans and counts, run_qa's span
// choice, and fine-tuning from pretraining weights.
#include "models/bert_question_answering.h"

#include <cstring>

#include <gtest/gtest.h>

#include "models/bert_testing.h"

namespace ddp {
namespace {

using testing::CheckGradients;
using testing::Copies;
using testing::MakeModel;
using testing::Small;
using testing::SmallBatch;

// Question answering: SmallBatch's tokens with answer spans; the second
// sample's end is past the sequence (clamped to T = 5 by the data), so the
// loss ignores it: its start and end means count 2 and 1 positions.
Batch AnswerBatch() {
  Batch b = SmallBatch();
  b.tensors.resize(3);
  b.tensors.push_back({"start_positions", Tensor::FromVector<int64_t>({1, 2}, {2})});
  b.tensors.push_back({"end_positions", Tensor::FromVector<int64_t>({3, 5}, {2})});
  return b;
}

std::unique_ptr<Model> AnswerModel(const BertConfig& c) {
  return std::make_unique<Model>("bert", BuildBertForQuestionAnswering(c), 7);
}

TEST(BertQuestionAnsweringTest, QuestionAnsweringGradientsMatchFiniteDifferences) {
  BertConfig c = Small();
  c.dropout = 0.2f;
  CheckGradients(c, AnswerModel(c), AnswerBatch());
}

// The device-side loss (a CUDA graph's step) equals the host loss, and the
// backward after it the host's, bit for bit; evaluation gives each
// feature's best span and counts the exact ones among the labelled.
TEST(BertQuestionAnsweringTest, QuestionAnsweringDeviceSideLossAndEvaluation) {
  std::unique_ptr<Model> host = AnswerModel(Small()), device = AnswerModel(Small());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  const Batch batch = AnswerBatch();
  const double want = host->ForwardLoss(ctx, batch).loss;
  host->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  ASSERT_EQ(device->loss_stats_size(), 6);
  Tensor stats = Tensor::Zeros({6}, DType::kF64);
  device->ForwardLossToDevice(ctx, batch, stats);
  EXPECT_EQ(device->ReadLoss(ctx, stats, batch).loss, want);
  EXPECT_EQ(stats.data<double>()[1], 2.0);  // starts counted
  EXPECT_EQ(stats.data<double>()[4], 1.0);  // ends counted: one was clamped
  device->BackwardLoss(ctx, 0.5, /*accumulate=*/false);
  const Tensor& a = host->flat_gradients();
  const Tensor& b = device->flat_gradients();
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);

  host->SetTraining(false);
  const LossResult r = host->ForwardLoss(ctx, batch);
  EXPECT_EQ(r.loss, want);
  ASSERT_EQ(r.counts.size(), 1u);
  EXPECT_EQ(r.counts[0].name, "span");
  EXPECT_EQ(r.counts[0].counted, 1);  // the second sample's span is not labelled
  ASSERT_EQ(r.sample_outputs.shape(), (Shape{2, 3}));
  for (int i = 0; i < 2; ++i) {
    const double* span = r.sample_outputs.data<double>() + 3 * i;
    EXPECT_LE(span[0], span[1]);
    EXPECT_GE(span[0], 0);
    EXPECT_LT(span[1], 5);
  }
}

// run_qa's choice: the best start + end among the top starts and ends,
// start <= end, at most max_length tokens, both in the context.
TEST(BertQuestionAnsweringTest, BestSpanIsRunQasChoice) {
  //                        0     1     2     3     4     5
  const float starts[] = {9.0f, 1.0f, 5.0f, 0.0f, 4.0f, 2.0f};
  const float ends[] = {9.0f, 0.0f, 1.0f, 3.0f, 6.0f, 0.5f};
  const int64_t offsets[] = {-1, -1, 0, 3, 4, 7, 8, 9, 10, 12, -1, -1};  // tokens 1..4 are context
  AnswerSpan best = BestSpan(starts, ends, 6, offsets, nullptr);
  EXPECT_EQ(best.start, 2);  // (0, 0) scores 18 but is not context
  EXPECT_EQ(best.end, 4);
  EXPECT_EQ(best.score, 11.0);
  best = BestSpan(starts, ends, 6, offsets, nullptr, 20, /*max_length=*/2);
  EXPECT_EQ(best.start, 4);  // (2, 4) is 3 tokens; (4, 4) scores 10, (2, 3) 8
  EXPECT_EQ(best.end, 4);
  const int64_t shorter[] = {-1, -1, 0, 3, 4, 7, 8, 9, -1, -1, -1, -1};  // token 4 is not context
  best = BestSpan(starts, ends, 6, shorter, nullptr);
  EXPECT_EQ(best.start, 2);
  EXPECT_EQ(best.end, 3);
  EXPECT_EQ(best.score, 8.0);
  // Only the top 1 start and end: (0, 0), outside the context: no span.
  best = BestSpan(starts, ends, 6, offsets, nullptr, 1);
  EXPECT_EQ(best.start, -1);
  // Without offsets the mask decides.
  const int64_t mask[] = {1, 1, 1, 1, 0, 0};
  best = BestSpan(starts, ends, 6, nullptr, mask);
  EXPECT_EQ(best.start, 0);
  EXPECT_EQ(best.end, 0);
}

TEST(BertQuestionAnsweringTest, QuestionAnsweringFineTunesFromPretrainingWeights) {
  std::unique_ptr<Model> pretrained = MakeModel(Small(), 1);
  std::unique_ptr<Model> qa = AnswerModel(Small());
  Model::LoadReport report;
  ASSERT_TRUE(qa->LoadStateDict(Copies(pretrained->StateDict()), &report).ok());
  EXPECT_EQ(report.fresh, (std::vector<std::string>{"qa_outputs.weight", "qa_outputs.bias"}));
  ASSERT_EQ(report.dropped.size(), 11u);  // the pooler, cls.predictions.* (the tied decoder too), cls.seq_relationship.*
  for (const std::string& name : report.dropped) {
    EXPECT_TRUE(name.rfind("cls.", 0) == 0 || name.rfind("bert.pooler.", 0) == 0) << name;
  }
  for (size_t i = 0; i + 2 < qa->parameters().size(); ++i) {  // bert.*, as saved
    const Parameter* p = qa->parameters()[i];
    EXPECT_EQ(p->name, pretrained->parameters()[i]->name);
    EXPECT_EQ(std::memcmp(p->value.raw_data(), pretrained->parameters()[i]->value.raw_data(), p->value.nbytes()), 0)
        << p->name;
  }
}

}  // namespace
}  // namespace ddp
