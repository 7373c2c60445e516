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

// Features know their SQuAD file: the fingerprint changes with any
// question's id or context, and features without one, or of another file,
// are refused, naming both.
TEST(SquadTest, FeaturesAreScoredOnlyAgainstTheFileTheyCameFrom) {
  const StatusOr<SquadSet> set = ReadSquad(WriteText("set.json", kSet));
  ASSERT_TRUE(set.ok()) << set.status().message();
  const std::string fingerprint = SquadFingerprint(*set);
  EXPECT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ(SquadFingerprint(*set), fingerprint);  // a function of the file alone
  SquadSet renamed = *set, edited = *set;
  renamed.questions[1].id = "q9";
  edited.contexts[1] += " ";
  EXPECT_NE(SquadFingerprint(renamed), fingerprint);
  EXPECT_NE(SquadFingerprint(edited), fingerprint);
  const std::map<std::string, std::string> metadata = {{"squad_fingerprint", fingerprint}};
  EXPECT_TRUE(CheckFeaturesSource(*set, metadata, "f", "s").ok());
  EXPECT_EQ(CheckFeaturesSource(edited, metadata, "--features f", "--squad s").message(),
            "--features f was made from another SQuAD file than --squad s (their questions or contexts differ); "
            "score features against the file they came from");
  EXPECT_EQ(CheckFeaturesSource(*set, {}, "--features f", "--squad s").message(),
            "--features f does not say which SQuAD file it was made from (no 'squad_fingerprint' in its metadata); "
            "make it again with tools/make_squad_tensors --eval");
}

// An offset past its context's characters (features of another file, or
// shifted) is refused, naming the feature, the token and the question.
TEST(SquadTest, OffsetsLieWithinTheirContexts) {
  const StatusOr<SquadSet> set = ReadSquad(WriteText("set.json", kSet));
  ASSERT_TRUE(set.ok());
  const Tensor examples = Tensor::FromVector<int64_t>({0, 1, 2}, {3});
  // q0's context has 39 characters: [34, 39) is its last word, [34, 40) one past.
  Tensor offsets = Tensor::FromVector<int64_t>({-1, -1, 34, 39, -1, -1, 0, 4, -1, -1, 0, 4}, {3, 2, 2});
  EXPECT_TRUE(CheckFeatures(*set, examples, offsets, "f").ok());
  offsets.data<int64_t>()[3] = 40;
  EXPECT_EQ(CheckFeatures(*set, examples, offsets, "f").message(),
            "f: offset_mapping[0, 1] is [34, 40), outside the 39 characters of question 'q0''s context (features of "
            "another SQuAD file?)");
  offsets.data<int64_t>()[3] = 33;  // ends before it begins
  EXPECT_FALSE(CheckFeatures(*set, examples, offsets, "f").ok());
  offsets.data<int64_t>()[3] = 39;
  offsets.data<int64_t>()[4] = 5;  // one end -1, the other not
  EXPECT_FALSE(CheckFeatures(*set, examples, offsets, "f").ok());
}

// Answers that label no characters, and an answer_start past int64 (shown
// as the file writes it), are one line naming the question.
TEST(SquadTest, AnswersOfNoCharactersAndHugeStartsAreRefused) {
  auto error = [](const std::string& answer) {
    const std::string text = R"({"data": [{"paragraphs": [{"context": "abc def", "qas": [{"id": "z3",
        "question": "q", "answers": [)" + answer + "]}]}]}]}";
    const StatusOr<SquadSet> set = ReadSquad(WriteText("answer.json", text));
    return set.ok() ? std::string("ok") : set.status().message();
  };
  const std::string path = testing::TempPath("answer.json");
  EXPECT_EQ(error(R"({"text": "def", "answer_start": 4})"), "ok");
  EXPECT_EQ(error(R"({"text": "", "answer_start": 3})"),
            path + ": question 'z3': answer '' is empty: an answer is some of the context's words");
  const std::string no_word = "holds no word (only white space, control, format or combining characters): an "
                              "answer is some of the context's words";
  EXPECT_EQ(error(R"({"text": " \u00a0\u3000", "answer_start": 3})"),
            path + ": question 'z3': answer ' \xc2\xa0\xe3\x80\x80' " + no_word);
  // A zero-width space, a soft hyphen and a combining acute: dropped or stripped by the tokenizer.
  EXPECT_EQ(error(R"({"text": "\u200b\u00ad\u0301", "answer_start": 3})"),
            path + ": question 'z3': answer '\xe2\x80\x8b\xc2\xad\xcc\x81' " + no_word);
  EXPECT_EQ(error(R"({"text": "def", "answer_start": 18446744073709551615})"),
            path + ": question 'z3': answer 'def' at character 18446744073709551615 is not in its context of 7 "
                   "characters");
  EXPECT_EQ(error(R"({"text": "def", "answer_start": 9223372036854775806})"),
            path + ": question 'z3': answer 'def' at character 9223372036854775806 is not in its context of 7 "
                   "characters");
  EXPECT_EQ(error(R"({"text": "def", "answer_start": -1})"),
            path + ": question 'z3': answer 'def' at character -1 is not in its context of 7 characters");
}

// A predictions line's fields as written: an index past int64 or a score
// that is not a number is named, not saturated or read as 0.
TEST(SquadTest, PredictionsFieldsAreReadAsWritten) {
  auto error = [](const std::string& lines) {
    const StatusOr<std::vector<FeatureSpan>> spans =
        ReadFeatureSpans(WriteText("p.tsv", "feature\tstart\tend\tscore\n" + lines));
    return spans.ok() ? std::string("ok") : spans.status().message();
  };
  const std::string path = testing::TempPath("p.tsv");
  EXPECT_EQ(error("0\t1\t2\t0.5\n1\t-1\t-1\t-inf\n"), "ok");
  EXPECT_EQ(error("0\t99999999999999999999\t2\t0.5\n"),
            path + ": line 2: the start '99999999999999999999' is not a token index");
  EXPECT_EQ(error("0\t1\t2x\t0.5\n"), path + ": line 2: the end '2x' is not a token index");
  EXPECT_EQ(error("0\t1\t2\tnan\n"), path + ": line 2: the score 'nan' is not a number");
  EXPECT_EQ(error("1\t1\t2\t0.5\n"), path + ": line 2 is not feature 0's start, end and score");
  EXPECT_EQ(error("0\t1\t2\n"), path + ": line 2 is not feature 0's start, end and score");
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
