// SQuAD's metrics on hand-made predictions whose EM and F1 are worked out
// here, the official script's normalization, and the JSON's bad input.
#include "runtime/data/squad.h"

#include <fstream>

#include <gtest/gtest.h>

#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = testing::TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(SquadTest, NormalizationIsTheOfficialScripts) {
  EXPECT_EQ(NormalizeAnswer("The  Quick, brown-fox!"), "quick brownfox");
  EXPECT_EQ(NormalizeAnswer("an Apple\ta day"), "apple day");
  EXPECT_EQ(NormalizeAnswer("theory"), "theory");  // an article inside a word stays
  EXPECT_EQ(NormalizeAnswer("CAF\xc3\x89 \xe2\x80\x9cq\xe2\x80\x9d"), "caf\xc3\xa9 \xe2\x80\x9cq\xe2\x80\x9d");  // lower case; only ASCII punctuation goes
  EXPECT_EQ(ExactMatch("the Eiffel Tower.", {"Paris", "Eiffel Tower"}), 1.0);
  EXPECT_EQ(ExactMatch("Eiffel", {"Eiffel Tower"}), 0.0);
  // [in, year, 1889] against [1889]: precision 1/3, recall 1.
  EXPECT_DOUBLE_EQ(F1Score("in the year 1889", {"1889"}), 0.5);
  // A bag of words: x x y against x y y shares one x and one y.
  EXPECT_DOUBLE_EQ(F1Score("x x y", {"x y y"}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(F1Score("x x y", {"z", "x y y"}), 2.0 / 3.0);  // the best truth
  EXPECT_EQ(F1Score("", {"x"}), 0.0);
}

TEST(SquadTest, CodePointsNotBytes) {
  const std::string s = "Caf\xc3\xa9 de Flore";
  EXPECT_EQ(CodePointStarts(s).size(), 14u);  // 13 characters, then the end
  EXPECT_EQ(CodePointSlice(s, 3, 7), "\xc3\xa9 de");
  EXPECT_EQ(CodePointSlice(s, 10, 99), "ore");
}

constexpr char kSet[] = R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [
  {"context": "Gustave Eiffel built the tower in 1889.",
   "qas": [{"id": "q0", "question": "When?", "answers": [{"text": "1889", "answer_start": 34}]}]},
  {"context": "Caf\u00e9 de Flore is in Paris France.",
   "qas": [{"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 20}]},
           {"id": "q2", "question": "What?", "answers": [{"text": "Caf\u00e9 de Flore", "answer_start": 0}]}]}]}]})";

// Four features of 4 tokens: question 0 has two windows, the second
// scoring higher ("1889", exact); question 1 predicts "Paris France"
// against "Paris" (F1 2/3); question 2 has no span (0). EM 100/3, F1
// 100 (1 + 2/3) / 3.
TEST(SquadTest, SpansBackToTextThenTheBestWindowThenEmAndF1) {
  const StatusOr<SquadSet> set = ReadSquad(WriteText("set.json", kSet));
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_EQ(set->questions.size(), 3u);
  EXPECT_EQ(set->questions[2].answers[0].text, "Caf\xc3\xa9 de Flore");
  const Tensor examples = Tensor::FromVector<int64_t>({0, 0, 1, 2}, {4});
  const Tensor offsets = Tensor::FromVector<int64_t>({-1, -1, 0,  7,  8,  14, 15, 20,   // q0: Gustave Eiffel built
                                                      -1, -1, 25, 30, 31, 33, 34, 38,   // q0: tower in 1889
                                                      -1, -1, 20, 25, 26, 32, -1, -1,   // q1: Paris France
                                                      -1, -1, 0,  4,  5,  7,  8,  13},  // q2: Café de Flore
                                                     {4, 4, 2});
  const std::vector<FeatureSpan> spans = {{1, 2, 1.0}, {3, 3, 2.0}, {1, 2, 0.5}, {-1, -1, 0.0}};
  const StatusOr<SquadScores> scores = ScoreSpans(*set, examples, offsets, spans, "features");
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_EQ(scores->answers, (std::vector<std::string>{"1889", "Paris France", ""}));
  EXPECT_DOUBLE_EQ(scores->exact_match, 100.0 / 3.0);
  EXPECT_DOUBLE_EQ(scores->f1, 100.0 * (1.0 + 2.0 / 3.0) / 3.0);

  // The predictions file round-trips.
  const std::string path = testing::TempPath("predictions.tsv");
  ASSERT_TRUE(WriteFeatureSpans(path, spans).ok());
  const StatusOr<std::vector<FeatureSpan>> read = ReadFeatureSpans(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 4u);
  EXPECT_EQ((*read)[1].start, 3);
  EXPECT_EQ((*read)[1].score, 2.0);
  EXPECT_EQ((*read)[3].start, -1);

  // Features of another file: a question without features.
  const Tensor fewer = Tensor::FromVector<int64_t>({0, 0, 1, 1}, {4});
  const StatusOr<SquadScores> wrong = ScoreSpans(*set, fewer, offsets, spans, "dev.safetensors");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "dev.safetensors has no feature of question 'q2' (features of another SQuAD file?)");
}

TEST(SquadTest, BadJsonIsOneLineNamingTheQuestion) {
  auto error = [](const std::string& name, const std::string& text) {
    const StatusOr<SquadSet> set = ReadSquad(WriteText(name, text));
    return set.ok() ? std::string("ok") : set.status().message();
  };
  const std::string bad = testing::TempPath("bad.json");
  EXPECT_EQ(error("bad.json", "{\"data\": [}"), bad + ": not valid JSON");
  const std::string missing = testing::TempPath("missing.json");
  EXPECT_EQ(error("missing.json", R"({"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "x7", "question": "q"}]}]}]})"),
            missing + ": question 'x7': no 'answers' (a list of text and answer_start)");
  const std::string outside = testing::TempPath("outside.json");
  EXPECT_EQ(error("outside.json", R"({"data": [{"paragraphs": [{"context": "abc def", "qas": [{"id": "y1",
      "question": "q", "answers": [{"text": "def", "answer_start": 3}]}]}]}]})"),
            outside + ": question 'y1': answer 'def' at character 3 is not in its context");
  const std::string no_id = testing::TempPath("no_id.json");
  EXPECT_EQ(error("no_id.json", R"({"data": [{"paragraphs": [{"context": "abc", "qas": [{"question": "q"}]}]}]})"),
            no_id + ": data[0].paragraphs[0].qas[0]: no string 'id'");
}

}  // namespace
}  // namespace ddp
