// BERT data: the generated corpus is deterministic per sample, shaped as
// BERT's inputs ([CLS] A [SEP] B [SEP], padding under the mask, segment
// types), masks about 15% of content tokens, carries both NSP labels and a
// learnable successor structure; a tensors: file with a bad id, a sequence
// too long or a mask of the wrong shape is refused naming the tensor.
#include "runtime/data/token_dataset.h"

#include <cstdlib>
#include <map>

#include <gtest/gtest.h>

#include "runtime/safetensors.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

TEST(SyntheticTokensTest, DeterministicAndShapedAsBertInputs) {
  TokenDataOptions options;
  options.seq_len = 32;
  auto data = std::move(OpenTokenDataset("--data", "synthetic", options)).value();
  EXPECT_EQ(data->size(), TokenDataset::kEndless);
  std::vector<int64_t> indices(400);
  for (int64_t i = 0; i < 400; ++i) indices[i] = 1000 + i;
  const TokenBatch b = data->Fill(indices.data(), 400);
  const TokenBatch again = data->Fill(indices.data() + 7, 1);
  const int64_t t = 32;
  for (int64_t i = 0; i < t; ++i) EXPECT_EQ(again.input_ids.data<int64_t>()[i], b.input_ids.data<int64_t>()[7 * t + i]);

  int64_t content = 0, chosen = 0, masked = 0, padded_samples = 0, next = 0;
  for (int64_t s = 0; s < 400; ++s) {
    const int64_t* ids = b.input_ids.data<int64_t>() + s * t;
    const int64_t* mask = b.attention_mask.data<int64_t>() + s * t;
    const int64_t* labels = b.labels.data<int64_t>() + s * t;
    const int64_t* types = b.token_type_ids.data<int64_t>() + s * t;
    EXPECT_EQ(ids[0], kClsToken);
    int64_t length = 0, seps = 0;
    for (int64_t i = 0; i < t; ++i) {
      length += mask[i];
      if (mask[i] == 0) {
        EXPECT_EQ(ids[i], kPadToken);
        EXPECT_EQ(labels[i], -100);
      }
      seps += ids[i] == kSepToken;
      if (labels[i] != -100) {
        ++chosen;
        EXPECT_GE(labels[i], 1000);
        masked += ids[i] == kMaskToken;
      }
      content += mask[i] && ids[i] != kClsToken && ids[i] != kSepToken;
    }
    // Exactly round(15%) of the sequence's content tokens (at least one).
    int64_t sample_content = 0, sample_chosen = 0;
    for (int64_t i = 0; i < t; ++i) {
      sample_content += mask[i] && ids[i] != kClsToken && ids[i] != kSepToken;
      sample_chosen += labels[i] != -100;
    }
    EXPECT_EQ(sample_chosen, MaskedCount(sample_content)) << "sample " << s;
    EXPECT_EQ(seps, 2);
    EXPECT_EQ(ids[length - 1], kSepToken);
    EXPECT_EQ(types[0], 0);
    EXPECT_EQ(types[length - 1], 1);
    padded_samples += length < t;
    next += b.next_sentence_label.data<int64_t>()[s] == 0;
  }
  EXPECT_NEAR(static_cast<double>(chosen) / content, 0.15, 0.02);
  EXPECT_NEAR(static_cast<double>(masked) / chosen, 0.8, 0.05);
  EXPECT_NEAR(padded_samples / 400.0, 0.25, 0.08);
  EXPECT_NEAR(next / 400.0, 0.5, 0.08);
  // Learnable: a segment's tokens come from few (its topic's 8), and B's
  // are A's when it is the next segment, others when not.
  double distinct_a = 0.0, shared_next = 0.0, shared_other = 0.0;
  for (int64_t s = 0; s < 400; ++s) {
    const int64_t* ids = b.input_ids.data<int64_t>() + s * t;
    const int64_t* types = b.token_type_ids.data<int64_t>() + s * t;
    std::map<int64_t, int64_t> a_tokens;
    int64_t b_count = 0, b_shared = 0;
    for (int64_t i = 1; i < t; ++i) {
      if (ids[i] < 1000) continue;
      if (types[i] == 0) {
        ++a_tokens[ids[i]];
      } else {
        ++b_count;
        b_shared += a_tokens.count(ids[i]);
      }
    }
    distinct_a += static_cast<double>(a_tokens.size()) / 400.0;
    const double share = b_count > 0 ? static_cast<double>(b_shared) / b_count : 0.0;
    (b.next_sentence_label.data<int64_t>()[s] == 0 ? shared_next : shared_other) += share;
  }
  EXPECT_LT(distinct_a, 11.0);
  EXPECT_GT(shared_next / next, 0.55);
  EXPECT_LT(shared_other / (400 - next), 0.15);
}

void WriteTokens(const std::string& path, const std::vector<NamedTensor>& tensors) {
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
}

std::string OpenError(const std::string& path, int64_t max_positions = 512) {
  TokenDataOptions options;
  options.model = "bert-tiny";
  options.max_positions = max_positions;
  return OpenTokenDataset("--data", "tensors:" + path, options).status().message();
}

TEST(TensorTokensTest, ReadsAFileAndRefusesBadTensorsByName) {
  const std::string path = testing::TempPath("tokens.safetensors");
  Tensor ids = Tensor::FromVector<int64_t>({101, 2000, 102, 0, 101, 3000, 4000, 102}, {2, 4});
  Tensor labels = Tensor::FromVector<int64_t>({-100, 2001, -100, -100, -100, -100, 4001, -100}, {2, 4});
  Tensor nsp = Tensor::FromVector<int64_t>({0, 1}, {2});
  Tensor mask = Tensor::FromVector<int64_t>({1, 1, 1, 0, 1, 1, 1, 1}, {2, 4});
  WriteTokens(path, {{"input_ids", ids}, {"labels", labels}, {"next_sentence_label", nsp}, {"attention_mask", mask}});
  TokenDataOptions options;
  auto data = std::move(OpenTokenDataset("--data", "tensors:" + path, options)).value();
  EXPECT_EQ(data->size(), 2);
  const int64_t second = 1;
  const TokenBatch b = data->Fill(&second, 1);
  EXPECT_EQ(b.input_ids.data<int64_t>()[1], 3000);
  EXPECT_EQ(b.token_type_ids.data<int64_t>()[1], 0);  // absent: zeros
  EXPECT_EQ(b.next_sentence_label.data<int64_t>()[0], 1);

  Tensor bad_ids = Tensor::FromVector<int64_t>({101, 2000, 102, 0, 101, 30522, 4000, 102}, {2, 4});
  WriteTokens(path, {{"input_ids", bad_ids}, {"labels", labels}, {"next_sentence_label", nsp}});
  EXPECT_EQ(OpenError(path), "--data " + path +
                                 ": tensor 'input_ids' element [1, 1] is 30522, outside [0, 30522) for bert-tiny's "
                                 "vocabulary of 30522");
  WriteTokens(path, {{"input_ids", ids}, {"labels", labels}, {"next_sentence_label", nsp}});
  EXPECT_EQ(OpenError(path, 3), "--data " + path +
                                    ": tensor 'input_ids' holds sequences of 4 tokens, longer than bert-tiny's 3 "
                                    "positions");
  WriteTokens(path, {{"input_ids", ids},
                     {"labels", labels},
                     {"next_sentence_label", nsp},
                     {"attention_mask", Tensor::FromVector<int64_t>({1, 1, 1, 1}, {1, 4})}});
  EXPECT_EQ(OpenError(path),
            "--data " + path + ": tensor 'attention_mask' must be i64 [2, 4] like input_ids, got i64[1, 4]");
  WriteTokens(path, {{"input_ids", ids}, {"labels", labels}});
  EXPECT_EQ(OpenError(path), "--data " + path + ": no tensor 'next_sentence_label' (i64 [N]: 0 IsNext, 1 NotNext)");
  // Classification: a label per sequence, within the classes.
  TokenDataOptions classes;
  classes.classes = 3;
  WriteTokens(path, {{"input_ids", ids}, {"labels", Tensor::FromVector<int64_t>({2, 3}, {2})}});
  EXPECT_EQ(OpenTokenDataset("--data", "tensors:" + path, classes).status().message(),
            "--data " + path + ": tensor 'labels' element [1] is 3, outside [0, 3) for --num-classes 3");
  WriteTokens(path, {{"input_ids", ids}, {"labels", labels}});
  EXPECT_EQ(OpenTokenDataset("--data", "tensors:" + path, classes).status().message(),
            "--data " + path + ": tensor 'labels' must be i64 [2] (a class per sequence), got i64[2, 4]");
  WriteTokens(path, {{"input_ids", ids}, {"labels", Tensor::FromVector<int64_t>({2, 0}, {2})}});
  auto ok = std::move(OpenTokenDataset("--data", "tensors:" + path, classes)).value();
  const int64_t first = 0;
  EXPECT_EQ(ok->Fill(&first, 1).labels.data<int64_t>()[0], 2);
}

// Question answering features: positions past the sequence are clamped to
// it and counted; a negative one, a features file of another --seq-len and
// a malformed offset_mapping are refused by name; offsets travel with
// their features.
TEST(TensorTokensTest, AnswerSpansAreClampedCheckedAndCarryTheirOffsets) {
  const std::string path = testing::TempPath("spans.safetensors");
  const Tensor ids = Tensor::FromVector<int64_t>({101, 2000, 102, 0, 101, 3000, 4000, 102}, {2, 4});
  std::vector<int64_t> offsets(16, -1);
  offsets[8 + 2 * 2] = 7;  // the second feature's third token: characters [7, 9)
  offsets[8 + 2 * 2 + 1] = 9;
  WriteTokens(path, {{"input_ids", ids},
                     {"start_positions", Tensor::FromVector<int64_t>({1, 9}, {2})},
                     {"end_positions", Tensor::FromVector<int64_t>({4, 9}, {2})},
                     {"offset_mapping", Tensor::FromVector<int64_t>(offsets, {2, 4, 2})}});
  TokenDataOptions qa;
  qa.question_answering = true;
  auto data = std::move(OpenTokenDataset("--data", "tensors:" + path, qa)).value();
  EXPECT_EQ(data->task(), TokenTask::kQuestionAnswering);
  EXPECT_TRUE(data->offset_mapping().defined());
  EXPECT_EQ(data->clamped_positions(), 2);  // 9 and 9; 4 is T itself, already the ignored position
  const int64_t both[] = {1, 0};
  const TokenBatch b = data->Fill(both, 2);
  EXPECT_EQ(b.start_positions.data<int64_t>()[0], 4);
  EXPECT_EQ(b.end_positions.data<int64_t>()[0], 4);
  EXPECT_EQ(b.start_positions.data<int64_t>()[1], 1);
  ASSERT_EQ(b.offset_mapping.shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(b.offset_mapping.data<int64_t>()[4], 7);
  EXPECT_EQ(b.offset_mapping.data<int64_t>()[5], 9);

  WriteTokens(path, {{"input_ids", ids},
                     {"start_positions", Tensor::FromVector<int64_t>({1, -2}, {2})},
                     {"end_positions", Tensor::FromVector<int64_t>({1, 2}, {2})}});
  EXPECT_EQ(OpenTokenDataset("--data", "tensors:" + path, qa).status().message(),
            "--data " + path + ": tensor 'start_positions' element [1] is -2: a position cannot be negative");
  WriteTokens(path, {{"input_ids", ids}, {"start_positions", Tensor::FromVector<int64_t>({1, 2}, {2})}});
  EXPECT_EQ(OpenTokenDataset("--data", "tensors:" + path, qa).status().message(),
            "--data " + path + ": no tensor 'end_positions' (i64 [N]: the answer's token in each sequence)");
  WriteTokens(path, {{"input_ids", ids},
                     {"start_positions", Tensor::FromVector<int64_t>({1, 2}, {2})},
                     {"end_positions", Tensor::FromVector<int64_t>({1, 2}, {2})},
                     {"offset_mapping", Tensor::FromVector<int64_t>(std::vector<int64_t>(8, 0), {2, 4})}});
  EXPECT_EQ(OpenTokenDataset("--data", "tensors:" + path, qa).status().message(),
            "--data " + path + ": tensor 'offset_mapping' must be i64 [2, 4, 2] (each token's characters in its "
                               "context), got i64[2, 4]");
  qa.expect_seq_len = 384;
  EXPECT_EQ(OpenTokenDataset("--eval-data", "tensors:" + path, qa).status().message(),
            "--eval-data " + path + ": tensor 'input_ids' holds sequences of 4 tokens, but --seq-len is 384 "
                                    "(features made for another sequence length?)");
}

TEST(SyntheticTokensTest, ClassificationLabelsAreTheTopicClass) {
  TokenDataOptions options;
  options.seq_len = 32;
  options.classes = 4;
  auto data = std::move(OpenTokenDataset("--data", "synthetic", options)).value();
  std::vector<int64_t> indices = {0, 1, 2, 3, 4, 5, 6, 7};
  const TokenBatch b = data->Fill(indices.data(), 8);
  EXPECT_EQ(b.labels.shape(), (Shape{8}));
  EXPECT_FALSE(b.next_sentence_label.defined());
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_GE(b.labels.data<int64_t>()[i], 0);
    EXPECT_LT(b.labels.data<int64_t>()[i], 4);
  }
  for (int64_t i = 0; i < 8 * 32; ++i) EXPECT_NE(b.input_ids.data<int64_t>()[i], kMaskToken);  // nothing masked
}

}  // namespace
}  // namespace ddp
