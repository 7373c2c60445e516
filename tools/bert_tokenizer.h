// BERT's uncased tokenizer (Hugging Face's BertTokenizer, do_lower_case):
// the basic tokenizer (NUL, U+FFFD and control characters removed,
// whitespace made spaces, CJK ideographs split out, NFC, split on
// whitespace; each token lower-cased, its accents stripped after NFD, and
// split around punctuation: ASCII's symbols and Unicode's P* categories),
// then greedy longest-match-first WordPiece with "##" continuations and
// [UNK] for a word it cannot cover (or longer than 100 characters). The
// special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) are never split.
// Unicode through ICU (its categories, case mappings and normalization).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/data/token_shards.h"
#include "runtime/status.h"

namespace ddp {

struct TracedWord;  // a word's code points, traced to the input's (bert_tokenizer.cc)

class BertTokenizer {
 public:
  // `vocab` is a vocab.txt: one token per line, its id the line's index.
  // Errors name the file; a vocabulary without [UNK], [CLS], [SEP], [MASK]
  // or [PAD] is refused.
  static StatusOr<BertTokenizer> FromVocabFile(const std::string& path, bool lower_case = true);
  static StatusOr<BertTokenizer> FromTokens(const std::vector<std::string>& tokens, bool lower_case = true,
                                            const std::string& where = "the vocabulary");

  // The basic tokenizer's words (UTF-8).
  std::vector<std::string> BasicTokens(const std::string& text) const;
  // WordPiece tokens of `text`, and their ids.
  std::vector<std::string> Tokenize(const std::string& text) const;
  std::vector<uint32_t> Encode(const std::string& text) const;
  // Encode's ids, each with the characters of `text` it came from: code
  // point indices [begin, end), as Hugging Face's fast tokenizers give
  // offsets. Every piece of a word whose normalization a character at a
  // time differs from the whole word's (Greek's final sigma) is traced to
  // the whole word.
  struct TokenSpan {
    uint32_t id;
    int64_t begin, end;
  };
  std::vector<TokenSpan> EncodeWithOffsets(const std::string& text) const;

  uint32_t vocab_size() const { return static_cast<uint32_t>(tokens_.size()); }
  SpecialTokens special() const { return special_; }
  uint32_t unk() const { return unk_; }

 private:
  BertTokenizer() = default;
  // Calls on_token(const TracedWord&, from, to) with each basic token:
  // characters [from, to) of a normalized word. One pass over the text, so that
  // tokenizing is linear in its length.
  template <typename OnToken>
  void ForEachBasicToken(const std::string& text, OnToken on_token) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, uint32_t> ids_;
  bool lower_case_ = true;
  SpecialTokens special_;
  uint32_t unk_ = 0;
  size_t longest_piece_ = 0;  // characters of the longest token
};

}  // namespace ddp
