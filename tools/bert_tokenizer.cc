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

std::vector<icu::UnicodeString> SplitOnWhitespace(const icu::UnicodeString& text) {
  std::vector<icu::UnicodeString> words;
  icu::UnicodeString word;
  for (int32_t i = 0; i < text.length(); i = text.moveIndex32(i, 1)) {
    const UChar32 c = text.char32At(i);
    if (IsWhitespace(c)) {
      if (!word.isEmpty()) words.push_back(word);
      word.remove();
    } else {
      word.append(c);
    }
  }
  if (!word.isEmpty()) words.push_back(word);
  return words;
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

std::vector<std::string> BertTokenizer::BasicTokens(const std::string& text) const {
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(text);
  // Cleaned, CJK ideographs spaced out.
  icu::UnicodeString cleaned;
  for (int32_t i = 0; i < input.length(); i = input.moveIndex32(i, 1)) {
    const UChar32 c = input.char32At(i);
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      cleaned.append(static_cast<UChar32>(' '));
    } else if (IsCjk(c)) {
      cleaned.append(static_cast<UChar32>(' ')).append(c).append(static_cast<UChar32>(' '));
    } else {
      cleaned.append(c);
    }
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  CHECK(U_SUCCESS(status)) << "ICU normalizers: " << u_errorName(status);
  const icu::UnicodeString normalized = nfc->normalize(cleaned, status);
  CHECK(U_SUCCESS(status)) << "NFC: " << u_errorName(status);
  std::vector<std::string> out;
  for (icu::UnicodeString word : SplitOnWhitespace(normalized)) {
    const std::string utf8 = Utf8(word);
    if (ids_.count(utf8) && std::find(std::begin(kSpecialNames), std::end(kSpecialNames), utf8) != std::end(kSpecialNames)) {
      out.push_back(utf8);  // never split
      continue;
    }
    if (lower_case_) {
      word.toLower(icu::Locale::getRoot());
      // Accents stripped: NFD, then the non-spacing marks dropped.
      const icu::UnicodeString decomposed = nfd->normalize(word, status);
      CHECK(U_SUCCESS(status)) << "NFD: " << u_errorName(status);
      word.remove();
      for (int32_t i = 0; i < decomposed.length(); i = decomposed.moveIndex32(i, 1)) {
        const UChar32 c = decomposed.char32At(i);
        if (u_charType(c) != U_NON_SPACING_MARK) word.append(c);
      }
    }
    // Each punctuation character a token of its own.
    icu::UnicodeString piece;
    for (int32_t i = 0; i < word.length(); i = word.moveIndex32(i, 1)) {
      const UChar32 c = word.char32At(i);
      if (IsPunctuation(c)) {
        if (!piece.isEmpty()) out.push_back(Utf8(piece));
        piece.remove();
        out.push_back(Utf8(icu::UnicodeString(c)));
      } else {
        piece.append(c);
      }
    }
    if (!piece.isEmpty()) out.push_back(Utf8(piece));
  }
  return out;
}

std::vector<std::string> BertTokenizer::Tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const std::string& word : BasicTokens(text)) {
    const icu::UnicodeString chars = icu::UnicodeString::fromUTF8(word);
    const int32_t n = chars.countChar32();
    if (static_cast<size_t>(n) > kMaxWordChars) {
      out.push_back(tokens_[unk_]);
      continue;
    }
    // Greedy longest match first, over code points.
    std::vector<std::string> pieces;
    bool covered = true;
    for (int32_t start = 0; start < n;) {
      int32_t end = n;
      std::string match;
      while (start < end) {
        const int32_t from = chars.moveIndex32(0, start), to = chars.moveIndex32(0, end);
        std::string candidate = Utf8(chars.tempSubStringBetween(from, to));
        if (start > 0) candidate = "##" + candidate;
        if (ids_.count(candidate)) {
          match = candidate;
          break;
        }
        --end;
      }
      if (match.empty()) {
        covered = false;
        break;
      }
      pieces.push_back(match);
      start = end;
    }
    if (covered) {
      out.insert(out.end(), pieces.begin(), pieces.end());
    } else {
      out.push_back(tokens_[unk_]);
    }
  }
  return out;
}

std::vector<uint32_t> BertTokenizer::Encode(const std::string& text) const {
  std::vector<uint32_t> ids;
  for (const std::string& token : Tokenize(text)) ids.push_back(ids_.at(token));
  return ids;
}

}  // namespace ddp
