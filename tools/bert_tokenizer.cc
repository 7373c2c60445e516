#include "tools/bert_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include <glog/logging.h>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "runtime/durable_files.h"

namespace ddp {
namespace {

constexpr size_t kMaxWordChars = 100;  // Hugging Face's max_input_chars_per_word
const char* const kSpecialNames[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool IsWhitespace(UChar32 c) {
  if (c < 0x80) return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  return u_charType(c) == U_SPACE_SEPARATOR;
}

// Unicode's C* categories, but tab, newline and carriage return, which are
// whitespace here.
bool IsControl(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
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
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return (U_GET_GC_MASK(c) & U_GC_P_MASK) != 0;
}

// The CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana).
bool IsCjk(UChar32 c) {
  if (c < 0x3400) return false;
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

StatusOr<BertTokenizer> BertTokenizer::FromTokens(const std::vector<std::string>& tokens, bool lower_case,
                                                  const std::string& where) {
  BertTokenizer t;
  t.tokens_ = tokens;
  t.lower_case_ = lower_case;
  for (size_t i = 0; i < tokens.size(); ++i) {
    t.ids_[tokens[i]] = static_cast<uint32_t>(i);  // the last one wins
    const size_t chars = static_cast<size_t>(icu::UnicodeString::fromUTF8(tokens[i]).countChar32());
    t.longest_piece_ = std::max(t.longest_piece_, chars);
  }
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
  if (!PathExists(path)) return NotFound("--vocab " + path + ": cannot open");
  const StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return Status(text.status().code(), "--vocab " + text.status().message());
  // Lines as Hugging Face's load_vocab reads them: Python's universal
  // newlines (\n, \r\n or \r end a line), only the line end stripped.
  std::vector<std::string> tokens;
  for (size_t at = 0; at < text->size();) {
    size_t end = text->find_first_of("\r\n", at);
    if (end == std::string::npos) end = text->size();
    tokens.push_back(text->substr(at, end - at));
    at = end + ((*text)[end] == '\r' && end + 1 < text->size() && (*text)[end + 1] == '\n' ? 2 : 1);
  }
  if (tokens.empty()) return InvalidArgument("--vocab " + path + ": empty");
  return FromTokens(tokens, lower_case, "--vocab " + path);
}

namespace {

// Appends code point `c` to `out` as UTF-8.
void AppendUtf8(UChar32 c, std::string& out) {
  char bytes[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(bytes, n, c);
  out.append(bytes, static_cast<size_t>(n));
}

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
// marks dropped): code points in, code points out.
std::vector<UChar32> NormalizeWord(const UChar32* chars, size_t n, bool lower_case) {
  icu::UnicodeString w = Normalized(Nfc(), icu::UnicodeString::fromUTF32(chars, static_cast<int32_t>(n)));
  if (lower_case) {
    w.toLower(icu::Locale::getRoot());
    w = Normalized(Nfd(), w);
  }
  std::vector<UChar32> out;
  out.reserve(static_cast<size_t>(w.length()));
  for (int32_t i = 0; i < w.length(); i = w.moveIndex32(i, 1)) {
    const UChar32 c = w.char32At(i);
    if (!lower_case || u_charType(c) != U_NON_SPACING_MARK) out.push_back(c);
  }
  return out;
}

}  // namespace

// A word as code points, each traced to the input's code points it came
// from: [begin[k], end[k]). Code points, not UTF-16, so that a character is
// found in constant time: tokenizing stays linear in a word's length.
struct TracedWord {
  std::vector<UChar32> chars;
  std::vector<int64_t> begin, end;
  void Append(UChar32 c, int64_t b, int64_t e) {
    chars.push_back(c);
    begin.push_back(b);
    end.push_back(e);
  }
  void Clear() {
    chars.clear();
    begin.clear();
    end.clear();
  }
};

namespace {

// The word normalized, each character traced to the input. A word of ASCII
// (most words) is lower-cased in place. Others are normalized a cluster (a
// character and the combining marks after it) at a time, which keeps the
// trace fine, a lone character's result kept in `cache`; where that differs
// from the whole word's normalization (Greek's final sigma), the whole
// word's is taken, traced to all of it.
void NormalizeTraced(TracedWord& word, bool lower_case,
                     std::unordered_map<UChar32, std::vector<UChar32>>& cache, TracedWord& out) {
  const size_t n = word.chars.size();
  if (std::all_of(word.chars.begin(), word.chars.end(), [](UChar32 c) { return c < 0x80; })) {
    if (lower_case) {
      for (UChar32& c : word.chars) c = c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    }
    std::swap(word, out);
    return;
  }
  out.Clear();
  for (size_t k = 0; k < n;) {
    size_t next = k + 1;
    while (next < n && u_getCombiningClass(word.chars[next]) != 0) ++next;
    std::vector<UChar32> cluster;
    const std::vector<UChar32>* normalized = &cluster;
    if (next == k + 1) {
      auto it = cache.find(word.chars[k]);
      if (it == cache.end()) it = cache.emplace(word.chars[k], NormalizeWord(&word.chars[k], 1, lower_case)).first;
      normalized = &it->second;
    } else {
      cluster = NormalizeWord(&word.chars[k], next - k, lower_case);
    }
    for (UChar32 c : *normalized) out.Append(c, word.begin[k], word.end[next - 1]);
    k = next;
  }
  const std::vector<UChar32> whole = NormalizeWord(word.chars.data(), n, lower_case);
  if (whole == out.chars) return;
  const int64_t first = word.begin.front(), last = word.end.back();
  out.Clear();
  for (UChar32 c : whole) out.Append(c, first, last);
}

// The input's code points (ill-formed UTF-8 is U+FFFD), cleaned (NUL,
// U+FFFD and controls dropped), split on whitespace, CJK ideographs words
// of their own: `word` is called with each word, traced to the input.
template <typename OnWord>
void SplitWords(const std::string& text, TracedWord& word, OnWord on_word) {
  word.Clear();
  auto flush = [&] {
    if (!word.chars.empty()) on_word(word);
    word.Clear();
  };
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int64_t length = static_cast<int64_t>(text.size());
  int64_t index = 0;
  for (int64_t i = 0; i < length; ++index) {
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    if (c < 0) c = 0xFFFD;
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      flush();
    } else if (IsCjk(c)) {
      flush();
      word.Append(c, index, index + 1);
      flush();
    } else {
      word.Append(c, index, index + 1);
    }
  }
  flush();
}

}  // namespace

template <typename OnToken>
void BertTokenizer::ForEachBasicToken(const std::string& text, OnToken on_token) const {
  TracedWord raw, normalized;
  std::unordered_map<UChar32, std::vector<UChar32>> cache;
  SplitWords(text, raw, [&](TracedWord& word) {
    // A special token is never split: its characters are the NFC of the
    // word's (one for one, as no canonical composition makes ASCII).
    if (word.chars.size() <= 6 && word.chars.front() == '[') {
      const std::vector<UChar32> nfc = NormalizeWord(word.chars.data(), word.chars.size(), /*lower_case=*/false);
      std::string name;
      for (UChar32 c : nfc) AppendUtf8(c, name);
      if (ids_.count(name) &&
          std::find(std::begin(kSpecialNames), std::end(kSpecialNames), name) != std::end(kSpecialNames)) {
        normalized.Clear();
        for (UChar32 c : nfc) normalized.Append(c, word.begin.front(), word.end.back());
        on_token(normalized, 0, nfc.size());
        return;
      }
    }
    NormalizeTraced(word, lower_case_, cache, normalized);
    // Each punctuation character a token of its own.
    const size_t n = normalized.chars.size();
    size_t start = 0;
    for (size_t k = 0; k < n; ++k) {
      if (!IsPunctuation(normalized.chars[k])) continue;
      if (k > start) on_token(normalized, start, k);
      on_token(normalized, k, k + 1);
      start = k + 1;
    }
    if (n > start) on_token(normalized, start, n);
  });
}

std::vector<std::string> BertTokenizer::BasicTokens(const std::string& text) const {
  std::vector<std::string> out;
  ForEachBasicToken(text, [&](const TracedWord& w, size_t from, size_t to) {
    out.emplace_back();
    for (size_t k = from; k < to; ++k) AppendUtf8(w.chars[k], out.back());
  });
  return out;
}

std::vector<BertTokenizer::TokenSpan> BertTokenizer::EncodeWithOffsets(const std::string& text) const {
  std::vector<TokenSpan> out;
  std::string bytes;
  std::vector<size_t> at;  // each character's first byte in `bytes`, then the end
  ForEachBasicToken(text, [&](const TracedWord& w, size_t from, size_t to) {
    // Hugging Face's WordPiece: a word of more than 100 characters is [UNK].
    if (to - from > kMaxWordChars) {
      out.push_back(TokenSpan{unk_, w.begin[from], w.end[to - 1]});
      return;
    }
    bytes.clear();
    at.clear();
    for (size_t k = from; k < to; ++k) {
      at.push_back(bytes.size());
      AppendUtf8(w.chars[k], bytes);
    }
    at.push_back(bytes.size());
    // Greedy longest match first, over characters; each piece traced
    // through its first and last characters.
    const size_t before = out.size();
    const size_t n = to - from;
    for (size_t start = 0; start < n;) {
      // No candidate longer than the vocabulary's longest piece can match:
      // starting there keeps a word's work linear in its length.
      size_t end = std::min(n, start + longest_piece_);
      for (; end > start; --end) {
        const std::string candidate = (start > 0 ? "##" : "") + bytes.substr(at[start], at[end] - at[start]);
        if (const auto it = ids_.find(candidate); it != ids_.end()) {
          out.push_back(TokenSpan{it->second, w.begin[from + start], w.end[from + end - 1]});
          break;
        }
      }
      if (end == start) {  // the word cannot be covered: one [UNK] for it all
        out.resize(before);
        out.push_back(TokenSpan{unk_, w.begin[from], w.end[to - 1]});
        return;
      }
      start = end;
    }
  });
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
