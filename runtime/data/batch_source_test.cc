// Batches of named tensors over the datasets: the tensors Specs() names are
// what Fill writes, equal to the datasets' own samples; the token source
// counts non-padding tokens; LoadBatch and CopyBatch keep the counters.
#include "runtime/data/batch_source.h"

#include <cstring>

#include <gtest/gtest.h>

#include "runtime/execution_context.h"

namespace ddp {
namespace {

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::vector<std::string> Names(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back(s.name);
  return names;
}

TEST(BatchSourceTest, TokenPretrainingBatchesAreTheDatasetsSamples) {
  TokenDataOptions options;
  options.seq_len = 24;
  auto reference = std::move(OpenTokenDataset("--data", "synthetic", options)).value();
  auto source = TokenBatches(std::move(OpenTokenDataset("--data", "synthetic", options)).value(), "synthetic");
  EXPECT_EQ(Names(source->Specs(5)),
            (std::vector<std::string>{"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label",
                                      "mlm_positions", "mlm_labels"}));
  EXPECT_EQ(source->tokens_per_sample(), 24);
  EXPECT_STREQ(source->sample_noun(), "sequences");
  EXPECT_EQ(source->Describe(), "sequences of 24 tokens from synthetic");

  // Enough samples that some are padded (a quarter are shorter).
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 16; ++i) indices.push_back(100 + 3 * i);
  const Batch batch = LoadBatch(*source, indices, Device::Cpu());
  const TokenBatch want = reference->Fill(indices.data(), 16);
  EXPECT_TRUE(SameBytes(batch.Get("input_ids"), want.input_ids));
  EXPECT_TRUE(SameBytes(batch.Get("token_type_ids"), want.token_type_ids));
  EXPECT_TRUE(SameBytes(batch.Get("attention_mask"), want.attention_mask));
  EXPECT_TRUE(SameBytes(batch.Get("labels"), want.labels));
  EXPECT_TRUE(SameBytes(batch.Get("next_sentence_label"), want.next_sentence_label));
  int64_t real = 0;
  for (int64_t i = 0; i < want.attention_mask.numel(); ++i) real += want.attention_mask.data<int64_t>()[i];
  EXPECT_EQ(batch.real_tokens, real);
  EXPECT_LT(real, 16 * 24);  // padding is not counted
  // The MLM rows, found before upload: round(15%) of 21 content positions
  // bound each sequence's, 3; each labelled position once, in order, then
  // row b * 24 with label -100.
  const int64_t per = 3;
  ASSERT_EQ(batch.Get("mlm_positions").shape(), (Shape{16 * per}));
  const int64_t* rows = batch.Get("mlm_positions").data<int64_t>();
  const int64_t* targets = batch.Get("mlm_labels").data<int64_t>();
  for (int64_t b = 0; b < 16; ++b) {
    std::vector<int64_t> want_rows, want_targets;
    for (int64_t i = 0; i < 24; ++i) {
      const int64_t label = want.labels.data<int64_t>()[b * 24 + i];
      if (label == -100) continue;
      want_rows.push_back(b * 24 + i);
      want_targets.push_back(label);
    }
    ASSERT_LE(want_rows.size(), static_cast<size_t>(per));
    while (want_rows.size() < static_cast<size_t>(per)) {
      want_rows.push_back(b * 24);
      want_targets.push_back(-100);
    }
    EXPECT_EQ(std::vector<int64_t>(rows + b * per, rows + (b + 1) * per), want_rows) << "sequence " << b;
    EXPECT_EQ(std::vector<int64_t>(targets + b * per, targets + (b + 1) * per), want_targets) << "sequence " << b;
  }

  // Copied into other buffers, counters and all.
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  Batch into = AllocateBatch(*source, 16, Device::Cpu());
  Batch from = batch;
  from.step = 7;
  from.first_sample = 48;
  CopyBatch(ctx, from, into);
  EXPECT_TRUE(SameBytes(into.Get("labels"), want.labels));
  EXPECT_EQ(into.real_tokens, real);
  EXPECT_EQ(into.step, 7);
  EXPECT_EQ(into.first_sample, 48);
}

TEST(BatchSourceTest, TokenClassificationBatchesHaveOneLabelPerSequence) {
  TokenDataOptions options;
  options.seq_len = 16;
  options.classes = 3;
  auto source = TokenBatches(std::move(OpenTokenDataset("--data", "synthetic", options)).value(), "synthetic");
  const std::vector<TensorSpec> specs = source->Specs(4);
  EXPECT_EQ(Names(specs), (std::vector<std::string>{"input_ids", "token_type_ids", "attention_mask", "labels"}));
  EXPECT_EQ(specs[3].shape, (Shape{4}));
  const Batch batch = LoadBatch(*source, {0, 1, 2, 3}, Device::Cpu());
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t label = batch.Get("labels").data<int64_t>()[i];
    EXPECT_TRUE(label >= 0 && label < 3) << label;
  }
}

TEST(BatchSourceTest, ImageBatchesAreTheDatasetsSamples) {
  ImageDataOptions options;
  options.image_size = 16;
  options.num_classes = 10;
  auto reference = std::move(OpenImageDataset("--data", "synthetic", options)).value();
  auto source = ImageBatches(std::move(OpenImageDataset("--data", "synthetic", options)).value(), "synthetic");
  const std::vector<TensorSpec> specs = source->Specs(3);
  EXPECT_EQ(Names(specs), (std::vector<std::string>{"images", "labels"}));
  EXPECT_EQ(specs[0].shape, (Shape{3, 3, 16, 16}));
  EXPECT_EQ(source->tokens_per_sample(), 0);
  EXPECT_EQ(source->Describe(), "16x16 images from synthetic");

  const std::vector<int64_t> indices = {5, 9, 2};
  const Batch batch = LoadBatch(*source, indices, Device::Cpu());
  Tensor images = Tensor::Empty({3, 3, 16, 16}, DType::kF32), labels = Tensor::Empty({3}, DType::kI64);
  reference->Fill(indices.data(), 3, /*epoch=*/0, images, labels);
  EXPECT_TRUE(SameBytes(batch.Get("images"), images));
  EXPECT_TRUE(SameBytes(batch.Get("labels"), labels));
  EXPECT_EQ(batch.real_tokens, 0);
}

}  // namespace
}  // namespace ddp
