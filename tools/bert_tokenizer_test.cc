// BERT's uncased tokenizer on tokenizations worked out by hand from
// Hugging Face's BasicTokenizer and WordpieceTokenizer rules, against a
// small vocabulary made here.
#include "tools/bert_tokenizer.h"

#include <fstream>

#include <gtest/gtest.h>

namespace ddp {
namespace {

using Tokens = std::vector<std::string>;

BertTokenizer Make(bool lower_case = true) {
  const Tokens vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff", "##able",
                        ",",     "!",     "the",   "caf",   "##e",    "i",     "—",     "$",  "你",    "好",
                        "##s",   "run",   "##ning", "a",    "σοφος",  "ς",     "'",     "don", "t",    "ü"};
  return BertTokenizer::FromTokens(vocab, lower_case).value();
}

TEST(BertTokenizerTest, BasicTokenizerCleansLowersStripsAccentsAndSplitsPunctuation) {
  const BertTokenizer t = Make();
  EXPECT_EQ(t.BasicTokens("Hello, World!"), (Tokens{"hello", ",", "world", "!"}));
  // Whitespace of every kind (tab, no-break space U+00A0, ideographic space
  // U+3000), control characters (BEL, a zero-width joiner U+200D is Cf)
  // dropped, NUL and U+FFFD dropped.
  EXPECT_EQ(t.BasicTokens("  \tHELLO\xc2\xa0wor\x07ld\xe3\x80\x80" "a\xe2\x80\x8d" "b\xef\xbf\xbd" "c"),
            (Tokens{"hello", "world", "abc"}));
  // Accents: café (precomposed é, or e + combining acute) -> cafe.
  EXPECT_EQ(t.BasicTokens("Caf\xc3\xa9 CAFE\xcc\x81"), (Tokens{"cafe", "cafe"}));
  // İ lower-cases to i + a combining dot, which accent stripping removes.
  EXPECT_EQ(t.BasicTokens("\xc4\xb0"), (Tokens{"i"}));
  // ASCII symbols are punctuation ($, ^ are not P* in Unicode), as are
  // Unicode's dashes and quotes; letters and digits stay together.
  EXPECT_EQ(t.BasicTokens("cost:$5^2 a\xe2\x80\x94" "b \xe2\x80\x9cq\xe2\x80\x9d"),
            (Tokens{"cost", ":", "$", "5", "^", "2", "a", "\xe2\x80\x94", "b", "\xe2\x80\x9c", "q", "\xe2\x80\x9d"}));
  // CJK ideographs stand alone; kana do not.
  EXPECT_EQ(t.BasicTokens("ab\xe4\xbd\xa0\xe5\xa5\xbd" "cd \xe3\x81\x82\xe3\x81\x84"),
            (Tokens{"ab", "\xe4\xbd\xa0", "\xe5\xa5\xbd", "cd", "\xe3\x81\x82\xe3\x81\x84"}));
  // A final capital sigma lower-cases to ς (ΣΟΦΟΣ -> σοφος), and the
  // special tokens are never split or lower-cased.
  EXPECT_EQ(t.BasicTokens("\xce\xa3\xce\x9f\xce\xa6\xce\x9f\xce\xa3 [MASK] [mask]"),
            (Tokens{"\xcf\x83\xce\xbf\xcf\x86\xce\xbf\xcf\x82", "[MASK]", "[", "mask", "]"}));
  // Cased: no lower-casing, no accent stripping.
  EXPECT_EQ(Make(false).BasicTokens("Caf\xc3\xa9!"), (Tokens{"Caf\xc3\xa9", "!"}));
}

TEST(BertTokenizerTest, WordPieceIsGreedyLongestMatchFirst) {
  const BertTokenizer t = Make();
  EXPECT_EQ(t.Tokenize("unaffable"), (Tokens{"un", "##aff", "##able"}));
  EXPECT_EQ(t.Tokenize("Running runs"), (Tokens{"run", "##ning", "run", "##s"}));
  EXPECT_EQ(t.Tokenize("Caf\xc3\xa9 don't"), (Tokens{"caf", "##e", "don", "'", "t"}));
  // A word the vocabulary cannot cover whole is one [UNK], not pieces.
  EXPECT_EQ(t.Tokenize("unaffablex hello"), (Tokens{"[UNK]", "hello"}));
  EXPECT_EQ(t.Tokenize(std::string(101, 'a')), (Tokens{"[UNK]"}));  // longer than 100 characters
  EXPECT_EQ(t.Tokenize("\xe4\xbd\xa0\xe5\xa5\xbd\xe5\x90\x97"), (Tokens{"\xe4\xbd\xa0", "\xe5\xa5\xbd", "[UNK]"}));
  // Ids are the vocabulary's lines.
  EXPECT_EQ(t.Encode("Hello, world! [SEP]"), (std::vector<uint32_t>{5, 10, 6, 11, 3}));
  EXPECT_EQ(t.special().pad, 0u);
  EXPECT_EQ(t.special().cls, 2u);
  EXPECT_EQ(t.special().sep, 3u);
  EXPECT_EQ(t.special().mask, 4u);
  EXPECT_EQ(t.unk(), 1u);
  EXPECT_EQ(t.vocab_size(), 30u);
}

// Each token's characters in the input, as code point indices: through
// punctuation splits, WordPiece continuations, a combining accent that
// normalization drops, CJK ideographs, a special token and Greek's final
// sigma (which lower-cases the whole word, traced to all of it). Worked by
// hand: H0..o4 ,5 C7 A8 F9 E10 (U+0301)11 d13 o14 n15 '16 t17 你19 好20
// [SEP]22..26 Σ28..Σ32.
TEST(BertTokenizerTest, OffsetsTraceEachTokenToItsCharacters) {
  const BertTokenizer t = Make();
  const std::string text = "Hello, CAFE\xcc\x81 don't \xe4\xbd\xa0\xe5\xa5\xbd [SEP] "
                           "\xce\xa3\xce\x9f\xce\xa6\xce\x9f\xce\xa3";
  const std::vector<BertTokenizer::TokenSpan> spans = t.EncodeWithOffsets(text);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 5},   {5, 6},   {7, 10},  {10, 12}, {13, 16},
                                                             {16, 17}, {17, 18}, {19, 20}, {20, 21}, {22, 27},
                                                             {28, 33}};
  ASSERT_EQ(spans.size(), expected.size());
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].begin, expected[i].first) << "token " << i;
    EXPECT_EQ(spans[i].end, expected[i].second) << "token " << i;
    ids.push_back(spans[i].id);
  }
  EXPECT_EQ(ids, t.Encode(text));
  EXPECT_EQ(t.Tokenize(text), (Tokens{"hello", ",", "caf", "##e", "don", "'", "t", "\xe4\xbd\xa0", "\xe5\xa5\xbd",
                                      "[SEP]", "\xcf\x83\xce\xbf\xcf\x86\xce\xbf\xcf\x82"}));
}

// Hugging Face's WordPiece gives [UNK] to a word of more than 100
// characters, after the basic tokenizer split it at punctuation: a long run
// with a comma in it is two words, each judged alone. The [UNK] spans the
// word's characters.
TEST(BertTokenizerTest, AWordPastOneHundredCharactersIsUnknownAfterPunctuationSplits) {
  const BertTokenizer t = Make();
  const std::string long_word(150, 'a');
  const std::vector<BertTokenizer::TokenSpan> spans = t.EncodeWithOffsets("hello " + long_word + " world");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[1].id, t.unk());
  EXPECT_EQ(spans[1].begin, 6);
  EXPECT_EQ(spans[1].end, 156);
  EXPECT_EQ(t.Tokenize(std::string(60, 'a') + "," + std::string(60, 'a')),
            (Tokens{"[UNK]", ",", "[UNK]"}));  // each 60 characters: WordPiece tries them, and no piece covers them
  EXPECT_EQ(t.Tokenize("a," + std::string(101, 'a') + ",a"), (Tokens{"a", ",", "[UNK]", ",", "a"}));
  // The limit is exact: 100 characters the vocabulary covers are 100
  // pieces, 101 are [UNK].
  const BertTokenizer as = BertTokenizer::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a"}).value();
  EXPECT_EQ(as.Tokenize(std::string(100, 'a')).size(), 100u);
  EXPECT_EQ(as.Tokenize(std::string(101, 'a')), (Tokens{"[UNK]"}));
  // A whole 1 MB word of ASCII, or of accented letters, in one [UNK].
  EXPECT_EQ(t.Tokenize(std::string(1 << 20, 'x')), (Tokens{"[UNK]"}));
  std::string accented;
  for (int i = 0; i < (1 << 18); ++i) accented += "\xc3\xa9";
  EXPECT_EQ(t.Tokenize(accented), (Tokens{"[UNK]"}));
}

// A vocabulary file is read as Hugging Face's load_vocab reads it: CRLF and
// CR line ends are line ends (Python's universal newlines), so a vocabulary
// saved on Windows gives the same ids. A directory is named as one.
TEST(BertTokenizerTest, VocabularyFilesOfAnyLineEndReadAlike) {
  const std::string dir = ::testing::TempDir();
  const std::string lf = dir + "/lf.txt", crlf = dir + "/crlf.txt", cr = dir + "/cr.txt";
  const std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"};
  for (const auto& [path, end] : std::vector<std::pair<std::string, std::string>>{{lf, "\n"}, {crlf, "\r\n"}, {cr, "\r"}}) {
    std::ofstream out(path, std::ios::binary);
    for (const std::string& token : tokens) out << token << end;
  }
  for (const std::string& path : {lf, crlf, cr}) {
    const StatusOr<BertTokenizer> t = BertTokenizer::FromVocabFile(path);
    ASSERT_TRUE(t.ok()) << path << ": " << t.status().message();
    EXPECT_EQ(t->vocab_size(), 7u) << path;
    EXPECT_EQ(t->Encode("Hello, world [MASK]"), (std::vector<uint32_t>{5, 1, 6, 4})) << path;
  }
  EXPECT_EQ(BertTokenizer::FromVocabFile(dir).status().message(), "--vocab " + dir + " is a directory, not a file");
}

TEST(BertTokenizerTest, AVocabularyWithoutTheSpecialTokensIsRefused) {
  const StatusOr<BertTokenizer> t = BertTokenizer::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "the vocabulary has no [MASK] token");
  EXPECT_EQ(BertTokenizer::FromVocabFile("/nonexistent/vocab.txt").status().message(),
            "--vocab /nonexistent/vocab.txt: cannot open");
}

}  // namespace
}  // namespace ddp
