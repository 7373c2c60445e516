#include "runtime/data/squad.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "runtime/durable_files.h"

namespace ddp {
namespace {

using nlohmann::json;

// A string field of `j`, or an error naming `where`.
Status GetString(const json& j, const char* field, const std::string& where, std::string* out) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return InvalidArgument(where + ": no string '" + field + "'");
  *out = it->get<std::string>();
  return Status::Ok();
}

// Whether `text` holds a character BERT's tokenizer keeps in a token: not
// white space, not a control, format, unassigned or private-use character
// or U+FFFD (which it drops), and not a combining mark (which uncased
// vocabularies strip).
bool HoldsAWord(const std::string& text) {
  const icu::UnicodeString s = icu::UnicodeString::fromUTF8(text);
  for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) {
    const UChar32 c = s.char32At(i);
    constexpr uint32_t kDropped = U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CN_MASK | U_GC_CO_MASK | U_GC_CS_MASK |
                                  U_GC_MN_MASK | U_GC_Z_MASK;
    if (!IsPythonSpace(c) && c != 0xFFFD && (U_GET_GC_MASK(c) & kDropped) == 0) return true;
  }
  return false;
}

// answer_start as the file writes it: an integer within the context's
// characters, else one line naming the question and the number as written.
StatusOr<int64_t> AnswerStart(const json& a, const std::string& named, const std::string& text, int64_t characters,
                              int64_t length) {
  const auto start = a.find("answer_start");
  if (start == a.end() || !start->is_number_integer()) {
    return InvalidArgument(named + ": answer '" + text + "' has no integer 'answer_start'");
  }
  constexpr int64_t kLargest = std::numeric_limits<int64_t>::max();
  const bool huge = start->is_number_unsigned() && start->get<uint64_t>() > static_cast<uint64_t>(kLargest);
  const int64_t value = huge ? kLargest : start->get<int64_t>();
  if (huge || value < 0 || value > characters - length) {
    return InvalidArgument(named + ": answer '" + text + "' at character " + start->dump() +
                           " is not in its context of " + std::to_string(characters) + " characters");
  }
  return value;
}

// `context_starts` is CodePointStarts(context).
Status ReadQuestion(const json& qa, const std::string& path, const std::string& context,
                    const std::vector<size_t>& context_starts, const std::string& where, SquadQuestion* q) {
  RETURN_IF_ERROR(GetString(qa, "id", path + ": " + where, &q->id));
  const std::string named = path + ": question '" + q->id + "'";
  RETURN_IF_ERROR(GetString(qa, "question", named, &q->question));
  const auto answers = qa.find("answers");
  if (answers == qa.end() || !answers->is_array() || answers->empty()) {
    return InvalidArgument(named + ": no 'answers' (a list of text and answer_start)");
  }
  const int64_t characters = static_cast<int64_t>(context_starts.size()) - 1;
  // Every answer within the context; the first (the one features label)
  // its characters there, whitespace aside (Google's run_squad compares so).
  auto spaced = [](const std::string& s) {
    std::istringstream in(s);
    std::string out;
    for (std::string w; in >> w;) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  for (const json& a : *answers) {
    SquadAnswer answer;
    RETURN_IF_ERROR(GetString(a, "text", named + ": an answer", &answer.text));
    // An answer of no token's characters labels nothing: the features
    // would label whatever token stands there.
    if (!HoldsAWord(answer.text)) {
      return InvalidArgument(named + ": answer '" + answer.text + "' " +
                             (answer.text.empty() ? "is empty"
                                                  : "holds no word (only white space, control, format or combining "
                                                    "characters)") +
                             ": an answer is some of the context's words");
    }
    const int64_t length = static_cast<int64_t>(CodePointStarts(answer.text).size()) - 1;
    ASSIGN_OR_RETURN(answer.start, AnswerStart(a, named, answer.text, characters, length));
    if (q->answers.empty()) {
      const std::string there = context.substr(context_starts[answer.start],
                                               context_starts[answer.start + length] - context_starts[answer.start]);
      if (spaced(there) != spaced(answer.text)) {
        return InvalidArgument(named + ": answer '" + answer.text + "' at character " + std::to_string(answer.start) +
                               " is not in its context");
      }
    }
    q->answers.push_back(std::move(answer));
  }
  return Status::Ok();
}

}  // namespace

std::vector<size_t> CodePointStarts(const std::string& utf8) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < utf8.size(); ++i) {
    if ((static_cast<unsigned char>(utf8[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(utf8.size());
  return starts;
}

std::string CodePointSlice(const std::string& utf8, int64_t begin, int64_t end) {
  const std::vector<size_t> starts = CodePointStarts(utf8);
  const int64_t n = static_cast<int64_t>(starts.size()) - 1;
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, begin, n);
  return utf8.substr(starts[begin], starts[end] - starts[begin]);
}

StatusOr<SquadSet> ReadSquad(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  const auto data = doc.find("data");
  if (!doc.is_object() || data == doc.end() || !data->is_array()) {
    return InvalidArgument(path + ": no 'data' list (SQuAD's articles)");
  }
  SquadSet set;
  for (size_t a = 0; a < data->size(); ++a) {
    const json& article = (*data)[a];
    const auto paragraphs = article.find("paragraphs");
    if (paragraphs == article.end() || !paragraphs->is_array()) {
      return InvalidArgument(path + ": data[" + std::to_string(a) + "]: no 'paragraphs' list");
    }
    for (size_t p = 0; p < paragraphs->size(); ++p) {
      const json& paragraph = (*paragraphs)[p];
      const std::string where = "data[" + std::to_string(a) + "].paragraphs[" + std::to_string(p) + "]";
      std::string context;
      RETURN_IF_ERROR(GetString(paragraph, "context", path + ": " + where, &context));
      const auto qas = paragraph.find("qas");
      if (qas == paragraph.end() || !qas->is_array()) return InvalidArgument(path + ": " + where + ": no 'qas' list");
      const std::vector<size_t> starts = CodePointStarts(context);
      set.contexts.push_back(context);
      for (size_t q = 0; q < qas->size(); ++q) {
        SquadQuestion question;
        question.context = static_cast<int64_t>(set.contexts.size()) - 1;
        RETURN_IF_ERROR(
            ReadQuestion((*qas)[q], path, context, starts, where + ".qas[" + std::to_string(q) + "]", &question));
        set.questions.push_back(std::move(question));
      }
    }
  }
  if (set.questions.empty()) return InvalidArgument(path + ": no questions");
  return set;
}

// Python's str.isspace(), on which the script's str.split() splits:
// bidirectional class WS, B or S, or category Zs (CPython's unicodedata).
bool IsPythonSpace(char32_t c) {
  switch (u_charDirection(c)) {
    case U_WHITE_SPACE_NEUTRAL:
    case U_BLOCK_SEPARATOR:
    case U_SEGMENT_SEPARATOR:
      return true;
    default:
      return u_charType(c) == U_SPACE_SEPARATOR;
  }
}

// A word character to Python 3's `re` on str (\w, and so \b): a letter
// (L*), anything with a numeric value (digits, numerals, fractions) or '_'.
// Combining marks, symbols and format characters are not.
bool IsPythonWordChar(char32_t c) {
  return u_isalpha(c) || u_getIntPropertyValue(c, UCHAR_NUMERIC_TYPE) != U_NT_NONE || c == '_';
}

std::string PythonLower(const std::string& utf8) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(utf8);
  s.toLower(icu::Locale::getRoot());  // full case mapping, final sigma in context
  std::string out;
  s.toUTF8String(out);
  return out;
}

namespace {

bool IsArticle(const std::vector<UChar32>& chars, size_t begin, size_t end) {
  auto is = [&](const char* word) {
    size_t i = begin;
    for (; *word != '\0'; ++word, ++i) {
      if (i == end || chars[i] != static_cast<UChar32>(*word)) return false;
    }
    return i == end;
  };
  return is("a") || is("an") || is("the");
}

// normalize_answer's words: lower(), then string.punctuation removed, then
// re.sub(r'\b(a|an|the)\b', ' ', ...), which replaces a maximal run of word
// characters that is an article, then split().
std::vector<std::string> NormalizedWords(const std::string& text) {
  const icu::UnicodeString lower = icu::UnicodeString::fromUTF8(PythonLower(text));
  static const std::string kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // string.punctuation
  std::vector<UChar32> chars;
  for (int32_t i = 0; i < lower.length(); i = lower.moveIndex32(i, 1)) {
    const UChar32 c = lower.char32At(i);
    if (c < 128 && kPunctuation.find(static_cast<char>(c)) != std::string::npos) continue;
    chars.push_back(c);
  }
  std::vector<UChar32> kept;
  for (size_t i = 0; i < chars.size();) {
    size_t j = i;
    while (j < chars.size() && IsPythonWordChar(chars[j])) ++j;
    if (j > i && IsArticle(chars, i, j)) {
      kept.push_back(' ');
    } else {
      j = std::max(j, i + 1);  // a word kept whole, or one other character
      for (size_t k = i; k < j; ++k) kept.push_back(chars[k]);
    }
    i = j;
  }
  std::vector<std::string> words;
  icu::UnicodeString word;
  auto flush = [&] {
    if (word.isEmpty()) return;
    words.emplace_back();
    word.toUTF8String(words.back());
    word.remove();
  };
  for (UChar32 c : kept) {
    if (IsPythonSpace(c)) {
      flush();
    } else {
      word.append(c);
    }
  }
  flush();
  return words;
}

}  // namespace

std::string NormalizeAnswer(const std::string& text) {
  std::string out;
  for (const std::string& w : NormalizedWords(text)) out += (out.empty() ? "" : " ") + w;
  return out;
}

namespace {

double F1One(const std::string& prediction, const std::string& truth) {
  const std::vector<std::string> p = NormalizedWords(prediction), t = NormalizedWords(truth);
  std::map<std::string, int64_t> counts;
  for (const std::string& w : t) ++counts[w];
  int64_t same = 0;
  for (const std::string& w : p) {
    auto it = counts.find(w);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(p.size());
  const double recall = static_cast<double>(same) / static_cast<double>(t.size());
  return 2.0 * precision * recall / (precision + recall);
}

}  // namespace

double ExactMatch(const std::string& prediction, const std::vector<std::string>& truths) {
  const std::string p = NormalizeAnswer(prediction);
  for (const std::string& t : truths) {
    if (NormalizeAnswer(t) == p) return 1.0;
  }
  return 0.0;
}

double F1Score(const std::string& prediction, const std::vector<std::string>& truths) {
  double best = 0.0;
  for (const std::string& t : truths) best = std::max(best, F1One(prediction, t));
  return best;
}

Status WriteFeatureSpans(const std::string& path, const std::vector<FeatureSpan>& spans) {
  std::string out = "feature\tstart\tend\tscore\n";
  char line[128];
  for (size_t i = 0; i < spans.size(); ++i) {
    std::snprintf(line, sizeof(line), "%zu\t%" PRId64 "\t%" PRId64 "\t%.17g\n", i, spans[i].start, spans[i].end,
                  spans[i].score);
    out += line;
  }
  return WriteFileDurably(path, out);
}

namespace {

// One tab-separated integer field of a predictions line, as written.
bool ParseIndex(const std::string& field, int64_t* value) {
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), *value);
  return error == std::errc() && end == field.data() + field.size();
}

}  // namespace

StatusOr<std::vector<FeatureSpan>> ReadFeatureSpans(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  std::istringstream in(text);
  std::string header;
  if (!std::getline(in, header) || header != "feature\tstart\tend\tscore") {
    return InvalidArgument(path + ": not a predictions file (its first line is not feature, start, end, score)");
  }
  std::vector<FeatureSpan> spans;
  int64_t number = 1;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) fields.push_back(cell);
    const std::string where = path + ": line " + std::to_string(number);
    int64_t feature = 0;
    FeatureSpan span;
    char* score_end = nullptr;
    if (fields.size() != 4 || !ParseIndex(fields[0], &feature) ||
        feature != static_cast<int64_t>(spans.size())) {
      return InvalidArgument(where + " is not feature " + std::to_string(spans.size()) + "'s start, end and score");
    }
    for (int k : {1, 2}) {
      if (!ParseIndex(fields[k], k == 1 ? &span.start : &span.end)) {
        return InvalidArgument(where + ": the " + (k == 1 ? "start" : "end") + " '" + fields[k] +
                               "' is not a token index");
      }
    }
    span.score = std::strtod(fields[3].c_str(), &score_end);
    if (fields[3].empty() || *score_end != '\0' || std::isnan(span.score)) {  // -inf: a feature without a span
      return InvalidArgument(where + ": the score '" + fields[3] + "' is not a number");
    }
    spans.push_back(span);
  }
  return spans;
}

std::string SquadFingerprint(const SquadSet& set) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  auto add = [&](const std::string& bytes) {
    for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    hash = (hash ^ 0xffu) * 0x100000001b3ull;  // a byte no UTF-8 text holds ends each field
  };
  for (const SquadQuestion& q : set.questions) {
    add(q.id);
    add(set.contexts[q.context]);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, hash);
  return hex;
}

Status CheckFeaturesSource(const SquadSet& set, const std::map<std::string, std::string>& metadata,
                           const std::string& features_name, const std::string& squad_name) {
  const auto found = metadata.find(kSquadFingerprintKey);
  const std::string fingerprint = found == metadata.end() ? "" : found->second;
  if (fingerprint.empty()) {
    return InvalidArgument(features_name + " does not say which SQuAD file it was made from (no '" +
                           std::string(kSquadFingerprintKey) + "' in its metadata); make it again with "
                           "tools/make_squad_tensors --eval");
  }
  if (fingerprint != SquadFingerprint(set)) {
    return InvalidArgument(features_name + " was made from another SQuAD file than " + squad_name +
                           " (their questions or contexts differ); score features against the file they came from");
  }
  return Status::Ok();
}

Status CheckFeatures(const SquadSet& set, const Tensor& example_index, const Tensor& offset_mapping,
                     const std::string& features_name) {
  const int64_t n = example_index.numel(), q = static_cast<int64_t>(set.questions.size());
  if (example_index.dtype() != DType::kI64 || offset_mapping.dtype() != DType::kI64 || offset_mapping.ndim() != 3 ||
      offset_mapping.dim(0) != n || offset_mapping.dim(2) != 2) {
    return InvalidArgument(features_name + ": example_index must be i64 [N] and offset_mapping i64 [N, T, 2], got " +
                           DTypeName(example_index.dtype()) + ShapeToString(example_index.shape()) + " and " +
                           DTypeName(offset_mapping.dtype()) + ShapeToString(offset_mapping.shape()));
  }
  std::vector<bool> seen(static_cast<size_t>(q), false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = example_index.data<int64_t>()[i];
    if (e < 0 || e >= q) {
      return InvalidArgument(features_name + ": example_index[" + std::to_string(i) + "] is " + std::to_string(e) +
                             ", but the SQuAD file has " + std::to_string(q) + " questions (features of another file?)");
    }
    seen[e] = true;
  }
  for (int64_t e = 0; e < q; ++e) {
    if (!seen[e]) {
      return InvalidArgument(features_name + " has no feature of question '" + set.questions[e].id +
                             "' (features of another SQuAD file?)");
    }
  }
  // Each token's characters within its question's context, or -1 for both.
  std::vector<int64_t> characters;
  for (const std::string& context : set.contexts) {
    characters.push_back(static_cast<int64_t>(CodePointStarts(context).size()) - 1);
  }
  const int64_t t = offset_mapping.dim(1);
  const int64_t* offsets = offset_mapping.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const SquadQuestion& question = set.questions[example_index.data<int64_t>()[i]];
    const int64_t length = characters[question.context];
    for (int64_t k = 0; k < t; ++k) {
      const int64_t begin = offsets[(i * t + k) * 2], end = offsets[(i * t + k) * 2 + 1];
      if ((begin == -1 && end == -1) || (begin >= 0 && begin <= end && end <= length)) continue;
      return InvalidArgument(features_name + ": offset_mapping[" + std::to_string(i) + ", " + std::to_string(k) +
                             "] is [" + std::to_string(begin) + ", " + std::to_string(end) +
                             "), outside the " + std::to_string(length) + " characters of question '" + question.id +
                             "''s context (features of another SQuAD file?)");
    }
  }
  return Status::Ok();
}

StatusOr<SquadScores> ScoreSpans(const SquadSet& set, const Tensor& example_index, const Tensor& offset_mapping,
                                 const std::vector<FeatureSpan>& spans, const std::string& features_name) {
  const int64_t n = example_index.numel(), q = static_cast<int64_t>(set.questions.size());
  if (static_cast<int64_t>(spans.size()) != n) {
    return InvalidArgument("there are " + std::to_string(spans.size()) + " predicted spans for the " +
                           std::to_string(n) + " features of " + features_name);
  }
  RETURN_IF_ERROR(CheckFeatures(set, example_index, offset_mapping, features_name));
  const int64_t t = offset_mapping.dim(1);
  const int64_t* examples = example_index.data<int64_t>();
  const int64_t* offsets = offset_mapping.data<int64_t>();
  std::vector<int64_t> best(static_cast<size_t>(q), -1);  // the best feature with a span, per question
  for (int64_t i = 0; i < n; ++i) {
    const FeatureSpan& s = spans[i];
    if (s.start < 0) continue;
    if (s.end < s.start || s.end >= t) {
      return InvalidArgument("the predicted span of feature " + std::to_string(i) + " is [" + std::to_string(s.start) +
                             ", " + std::to_string(s.end) + "], outside its " + std::to_string(t) + " tokens");
    }
    const int64_t e = examples[i];
    if (best[e] < 0 || s.score > spans[best[e]].score) best[e] = i;
  }
  SquadScores scores;
  scores.questions = q;
  double exact = 0.0, f1 = 0.0;
  for (int64_t e = 0; e < q; ++e) {
    const SquadQuestion& question = set.questions[e];
    std::string text;
    if (best[e] >= 0) {
      const FeatureSpan& s = spans[best[e]];
      const int64_t* row = offsets + best[e] * t * 2;
      if (row[2 * s.start] < 0 || row[2 * s.end + 1] < 0) {
        return InvalidArgument("the predicted span of feature " + std::to_string(best[e]) + " is not in its context "
                               "(offset_mapping is -1 there)");
      }
      text = CodePointSlice(set.contexts[question.context], row[2 * s.start], row[2 * s.end + 1]);
    }
    std::vector<std::string> truths;
    for (const SquadAnswer& a : question.answers) truths.push_back(a.text);
    exact += ExactMatch(text, truths);
    f1 += F1Score(text, truths);
    scores.answers.push_back(text);
  }
  scores.exact_match = 100.0 * exact / static_cast<double>(q);
  scores.f1 = 100.0 * f1 / static_cast<double>(q);
  return scores;
}

}  // namespace ddp
