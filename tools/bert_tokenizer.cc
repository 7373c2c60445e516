#include "tools/bert_tokenizer.h"

#include <algorithm>
#include <fstream>

#include <glog/logging.h>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace ddp {
namespace {

constexpr size_t kMaxWordChars = 100;  // Hugging Face's max_input_chars_per_word
const char* const kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool IsWhitespace(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_charType(c) == U_SPACE_SEPARATOR;
}

// Unicode's C* categories, but tab, newline and carriage return, which are
// whitespace here.
bool IsControl(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// ASCII's non-alphanumeric symbols ($, ^, `, ... are not P* in Unicode)
// and Unicode's P* categories.
bool IsPunctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

// The CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana).
bool IsCjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string Utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

}  // namespace

StatusOr<BertTokenizer> BertTokenizer::FromTokens(const std::vector<std::string>& tokens, bool lower_case,
                                                  const std::string& where) {
  BertTokenizer t;
  t.tokens_ = tokens;
  t.lower_case_ = lower_case;
  for (size_t i = 0; i < tokens.size(); ++i) t.ids_[tokens[i]] = static_cast<uint32_t>(i);  // the last one wins
  uint32_t special[5];
  for (int k = 0; k < 5; ++k) {
    const auto found = t.ids_.find(kSpecialNames[k]);
    if (found == t.ids_.end()) return InvalidArgument(where + " has no " + kSpecialNames[k] + " token");
    special[k] = found->second;
  }
  t.special_ = {special[0], special[2], special[3], special[4]};
  t.unk_ = special[1];
  return t;
}

StatusOr<BertTokenizer> BertTokenizer::FromVocabFile(const std::string& path, bool lower_case) {
  std::ifstream in(path);
  if (!in) return NotFound("--vocab " + path + ": cannot open");
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) tokens.push_back(line);  // Hugging Face strips only the newline
  if (tokens.empty()) return InvalidArgument("--vocab " + path + ": empty");
  return FromTokens(tokens, lower_case, "--vocab " + path);
}

namespace {

// A word of normalized characters, each with the code points of the input
// it came from: [begin[k], end[k]).
struct Traced {
  icu::UnicodeString text;  // one code point per entry of begin/end
  std::vector<int64_t> begin, end;
  void Append(UChar32 c, int64_t b, int64_t e) {
    text.append(c);
    begin.push_back(b);
    end.push_back(e);
  }
};

icu::UnicodeString Normalized(const icu::Normalizer2* normalizer, const icu::UnicodeString& s) {
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeString out = normalizer->normalize(s, status);
  CHECK(U_SUCCESS(status)) << "ICU normalization: " << u_errorName(status);
  return out;
}

const icu::Normalizer2* Nfc() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  CHECK(U_SUCCESS(status)) << "ICU NFC: " << u_errorName(status);
  return n;
}

const icu::Normalizer2* Nfd() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(status);
  CHECK(U_SUCCESS(status)) << "ICU NFD: " << u_errorName(status);
  return n;
}

// NFC, then (uncased) lower case and accents stripped (NFD, non-spacing
// marks dropped).
icu::UnicodeString NormalizeWord(const icu::UnicodeString& word, bool lower_case) {
  icu::UnicodeString w = Normalized(Nfc(), word);
  if (!lower_case) return w;
  w.toLower(icu::Locale::getRoot());
  const icu::UnicodeString decomposed = Normalized(Nfd(), w);
  icu::UnicodeString out;
  for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
    const UChar32 c = decomposed.char32At(i);
    if (u_charType(c) != U_NON_SPACING_MARK) out.append(c);
  }
  return out;
}

// A whitespace-delimited word of the cleaned input: its code points and
// their indices in the input.
struct RawWord {
  icu::UnicodeString text;
  std::vector<int64_t> at;
};

// Cleaned (NUL, U+FFFD and controls dropped), split on whitespace, CJK
// ideographs words of their own.
std::vector<RawWord> SplitWords(const std::string& text) {
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(text);
  std::vector<RawWord> words;
  RawWord word;
  auto flush = [&] {
    if (!word.text.isEmpty()) words.push_back(word);
    word = RawWord();
  };
  int64_t index = 0;
  for (int32_t i = 0; i < input.length(); i = input.moveIndex32(i, 1), ++index) {
    const UChar32 c = input.char32At(i);
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      flush();
    } else if (IsCjk(c)) {
      flush();
      word.text.append(c);
      word.at.push_back(index);
      flush();
    } else {
      word.text.append(c);
      word.at.push_back(index);
    }
  }
  flush();
  return words;
}

// The word normalized, each character traced to the input: normalized a
// cluster at a time (a character and the combining marks after it), which
// keeps the trace fine; where that differs from the whole word's
// normalization (Greek's final sigma), the whole word's, traced to all of it.
Traced NormalizeTraced(const RawWord& word, bool lower_case) {
  Traced out;
  std::vector<int32_t> starts;  // UTF-16 index of each code point
  for (int32_t i = 0; i < word.text.length(); i = word.text.moveIndex32(i, 1)) starts.push_back(i);
  const size_t n = starts.size();
  for (size_t k = 0; k < n;) {
    size_t next = k + 1;
    while (next < n && u_getCombiningClass(word.text.char32At(starts[next])) != 0) ++next;
    const int32_t from = starts[k], to = next < n ? starts[next] : word.text.length();
    const icu::UnicodeString cluster = NormalizeWord(word.text.tempSubStringBetween(from, to), lower_case);
    for (int32_t i = 0; i < cluster.length(); i = cluster.moveIndex32(i, 1)) {
      out.Append(cluster.char32At(i), word.at[k], word.at[next - 1] + 1);
    }
    k = next;
  }
  const icu::UnicodeString whole = NormalizeWord(word.text, lower_case);
  if (whole == out.text) return out;
  Traced coarse;
  for (int32_t i = 0; i < whole.length(); i = whole.moveIndex32(i, 1)) {
    coarse.Append(whole.char32At(i), word.at.front(), word.at.back() + 1);
  }
  return coarse;
}

// The characters [from, to) of `t` (code point indices).
Traced Slice(const Traced& t, size_t from, size_t to) {
  Traced out;
  for (size_t k = from; k < to; ++k) {
    out.Append(t.text.char32At(t.text.moveIndex32(0, static_cast<int32_t>(k))), t.begin[k], t.end[k]);
  }
  return out;
}

}  // namespace

std::vector<BertTokenizer::Piece> BertTokenizer::BasicPieces(const std::string& text) const {
  std::vector<Piece> out;
  auto emit = [&](const Traced& t) {
    if (t.text.isEmpty()) return;
    out.push_back(Piece{Utf8(t.text), t.begin.front(), t.end.back(), t.begin, t.end});
  };
  for (const RawWord& word : SplitWords(text)) {
    const std::string raw = Utf8(Normalized(Nfc(), word.text));
    if (ids_.count(raw) && std::find(std::begin(kSpecialNames), std::end(kSpecialNames), raw) != std::end(kSpecialNames)) {
      out.push_back(Piece{raw, word.at.front(), word.at.back() + 1, {}, {}});  // never split
      continue;
    }
    const Traced normalized = NormalizeTraced(word, lower_case_);
    // Each punctuation character a token of its own.
    const size_t n = normalized.begin.size();
    size_t start = 0;
    for (size_t k = 0; k < n; ++k) {
      if (!IsPunctuation(normalized.text.char32At(normalized.text.moveIndex32(0, static_cast<int32_t>(k))))) continue;
      emit(Slice(normalized, start, k));
      emit(Slice(normalized, k, k + 1));
      start = k + 1;
    }
    emit(Slice(normalized, start, n));
  }
  return out;
}

std::vector<std::string> BertTokenizer::BasicTokens(const std::string& text) const {
  std::vector<std::string> out;
  for (const Piece& p : BasicPieces(text)) out.push_back(p.text);
  return out;
}

std::vector<BertTokenizer::TokenSpan> BertTokenizer::EncodeWithOffsets(const std::string& text) const {
  std::vector<TokenSpan> out;
  for (const Piece& word : BasicPieces(text)) {
    const icu::UnicodeString chars = icu::UnicodeString::fromUTF8(word.text);
    const int32_t n = chars.countChar32();
    if (static_cast<size_t>(n) > kMaxWordChars) {
      out.push_back(TokenSpan{unk_, word.begin, word.end});
      continue;
    }
    // Greedy longest match first, over code points; each piece traced
    // through its first and last characters.
    std::vector<TokenSpan> pieces;
    bool covered = true;
    for (int32_t start = 0; start < n;) {
      int32_t end = n;
      uint32_t match = 0;
      bool found = false;
      while (start < end) {
        const int32_t from = chars.moveIndex32(0, start), to = chars.moveIndex32(0, end);
        std::string candidate = Utf8(chars.tempSubStringBetween(from, to));
        if (start > 0) candidate = "##" + candidate;
        if (const auto it = ids_.find(candidate); it != ids_.end()) {
          match = it->second;
          found = true;
          break;
        }
        --end;
      }
      if (!found) {
        covered = false;
        break;
      }
      pieces.push_back(TokenSpan{match, start, end});
      start = end;
    }
    if (!covered) {
      out.push_back(TokenSpan{unk_, word.begin, word.end});
      continue;
    }
    for (TokenSpan& p : pieces) {
      p.begin = word.char_begin.empty() ? word.begin : word.char_begin[p.begin];
      p.end = word.char_end.empty() ? word.end : word.char_end[p.end - 1];
      out.push_back(p);
    }
  }
  return out;
}

std::vector<std::string> BertTokenizer::Tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const TokenSpan& t : EncodeWithOffsets(text)) out.push_back(tokens_[t.id]);
  return out;
}

std::vector<uint32_t> BertTokenizer::Encode(const std::string& text) const {
  std::vector<uint32_t> ids;
  for (const TokenSpan& t : EncodeWithOffsets(text)) ids.push_back(t.id);
  return ids;
}

}  // namespace ddp
