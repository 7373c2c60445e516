// Question answering features from hand-made SQuAD questions, worked out by
// hand: windows of 4 context tokens overlapping by 2, an answer inside one
// window, one at a window's first and one at its last context token, one
// longer than a window (split: [CLS] everywhere), characters before the
// answer that are two bytes each (offsets count code points), and the
// question's id repeated across its windows.
#include "tools/squad_features.h"

#include <fstream>

#include <gtest/gtest.h>

namespace ddp {
namespace {

BertTokenizer Vocab() {
  return BertTokenizer::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "is", "it", "?", ":",
                                    "naive", "cafe", "a", "b", "c", "d", "e", "f"})
      .value();
}

// Context tokens, code points: naive [0,5) cafe [6,10) : [10,11) a [12,13)
// b [14,15) c [16,17) d [18,19) e [20,21) f [22,23).
SquadSet Set() {
  SquadSet set;
  set.contexts = {"na\xc3\xafve caf\xc3\xa9: a b c d e f"};
  set.questions = {{"q-inside", "What is it?", 0, {{"b c", 14}}},
                   {"q-split", "what is it?", 0, {{"a b c d e", 12}}},
                   {"q-last", "what is it?", 0, {{"f", 22}}}};
  return set;
}

std::vector<int64_t> Values(const std::vector<NamedTensor>& tensors, const std::string& name) {
  for (const NamedTensor& t : tensors) {
    if (t.name == name) return std::vector<int64_t>(t.tensor.data<int64_t>(), t.tensor.data<int64_t>() + t.tensor.numel());
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

TEST(SquadFeaturesTest, WindowsLabelsAndOffsetsAsRunQaMakesThem) {
  SquadFeatureOptions options;
  options.seq_len = 11;  // [CLS] 4 question tokens [SEP] 4 context tokens [SEP]
  options.doc_stride = 2;
  options.eval = true;
  SquadFeatureCounts counts;
  const StatusOr<std::vector<NamedTensor>> f = MakeSquadFeatures(Set(), Vocab(), options, &counts);
  ASSERT_TRUE(f.ok()) << f.status().message();
  // Windows of context tokens [0,4) [2,6) [4,8) [6,9) for each question.
  EXPECT_EQ(counts.questions, 3);
  EXPECT_EQ(counts.features, 12);
  EXPECT_EQ(counts.without_answer, 2 + 4 + 3);
  EXPECT_EQ(Values(*f, "example_index"), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  // Context tokens start at position 6. "b c": in window 2 at 8..9, at
  // window 3's first context token 6..7. "f": window 4's last, 8.
  EXPECT_EQ(Values(*f, "start_positions"), (std::vector<int64_t>{0, 8, 6, 0, 0, 0, 0, 0, 0, 0, 0, 8}));
  EXPECT_EQ(Values(*f, "end_positions"), (std::vector<int64_t>{0, 9, 7, 0, 0, 0, 0, 0, 0, 0, 0, 8}));
  const std::vector<int64_t> ids = Values(*f, "input_ids"), types = Values(*f, "token_type_ids"),
                             mask = Values(*f, "attention_mask"), offsets = Values(*f, "offset_mapping");
  // Window 2: [CLS] what is it ? [SEP] : a b c [SEP]
  EXPECT_EQ(std::vector<int64_t>(ids.begin() + 11, ids.begin() + 22),
            (std::vector<int64_t>{2, 5, 6, 7, 8, 3, 9, 12, 13, 14, 3}));
  EXPECT_EQ(std::vector<int64_t>(types.begin() + 11, types.begin() + 22),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(std::vector<int64_t>(offsets.begin() + 22, offsets.begin() + 44),
            (std::vector<int64_t>{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 10, 11, 12, 13, 14, 15, 16, 17,
                                  -1, -1}));
  // Window 4: three context tokens, then [SEP] and one padding position.
  EXPECT_EQ(std::vector<int64_t>(ids.begin() + 33, ids.begin() + 44),
            (std::vector<int64_t>{2, 5, 6, 7, 8, 3, 15, 16, 17, 3, 0}));
  EXPECT_EQ(std::vector<int64_t>(mask.begin() + 33, mask.begin() + 44),
            (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(std::vector<int64_t>(types.begin() + 33, types.begin() + 44),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0}));
  // Window 1's first context tokens carry the two-byte characters:
  // naive [0,5) cafe [6,10) in code points (bytes would be [0,6) [7,12)).
  EXPECT_EQ(std::vector<int64_t>(offsets.begin() + 12, offsets.begin() + 16), (std::vector<int64_t>{0, 5, 6, 10}));
}

// An answer whose last token is a continuation right after the one
// before ("1990" "##s"): the end is the continuation, and a window that
// stops before it does not hold the answer.
TEST(SquadFeaturesTest, AnAnswerEndingInAContinuationEndsThere) {
  const BertTokenizer vocab =
      BertTokenizer::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "when", "?", "in", "the", "1990", "##s"})
          .value();
  SquadSet set;
  set.contexts = {"in the 1990s the"};  // in [0,2) the [3,6) 1990 [7,11) ##s [11,12) the [13,16)
  set.questions = {{"q", "when?", 0, {{"1990s", 7}}}};
  SquadFeatureOptions options;
  options.seq_len = 7;  // [CLS] when ? [SEP] 2 context tokens [SEP]
  options.doc_stride = 1;
  SquadFeatureCounts counts;
  const StatusOr<std::vector<NamedTensor>> f = MakeSquadFeatures(set, vocab, options, &counts);
  ASSERT_TRUE(f.ok()) << f.status().message();
  // Windows [0,2) [1,3) [2,4) [3,5): only [2,4) holds 1990 ##s, at 4..5;
  // [1,3) ends at 1990, one character short.
  EXPECT_EQ(Values(*f, "start_positions"), (std::vector<int64_t>{0, 0, 4, 0}));
  EXPECT_EQ(Values(*f, "end_positions"), (std::vector<int64_t>{0, 0, 5, 0}));
}

TEST(SquadFeaturesTest, AQuestionWithoutRoomIsOneLineNamingIt) {
  SquadSet set = Set();
  set.questions[1].question = "a b c d e f a b";
  SquadFeatureOptions options;
  options.seq_len = 11;
  options.doc_stride = 2;
  SquadFeatureCounts counts;
  const StatusOr<std::vector<NamedTensor>> f = MakeSquadFeatures(set, Vocab(), options, &counts);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "question 'q-split' takes 8 tokens, leaving its context no room in a window of --seq-len 11");
  // Cut to --max-query-len, it fits.
  options.max_query_len = 4;
  EXPECT_TRUE(MakeSquadFeatures(set, Vocab(), options, &counts).ok());
  options.doc_stride = 4;
  const StatusOr<std::vector<NamedTensor>> stride = MakeSquadFeatures(set, Vocab(), options, &counts);
  ASSERT_FALSE(stride.ok());
  EXPECT_EQ(stride.status().message(),
            "--doc-stride 4 must be below the 4 context tokens a window holds beside question 'q-inside'");
}

}  // namespace
}  // namespace ddp
