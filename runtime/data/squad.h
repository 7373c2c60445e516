// SQuAD v1.1 (Rajpurkar et al., 2016): its JSON, its exact-match and F1
// metrics as the official evaluation script computes them, and the way
// back from answer spans over tokens to the context's text.
//
// Characters are code points, as SQuAD's answer_start and Hugging Face's
// offsets count them; the strings are UTF-8.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

struct SquadAnswer {
  std::string text;
  int64_t start = 0;  // answer_start: its first character in the context
};

struct SquadQuestion {
  std::string id, question;
  int64_t context = 0;  // index into SquadSet::contexts
  std::vector<SquadAnswer> answers;
};

struct SquadSet {
  std::vector<std::string> contexts;
  std::vector<SquadQuestion> questions;  // in the file's order: features' example_index counts them
};

// Malformed JSON, a missing or mistyped field, an answer past its context,
// or a first answer (the one features label) whose text is not its
// context's characters at answer_start (whitespace aside) is one line
// naming the file and the question id.
StatusOr<SquadSet> ReadSquad(const std::string& path);

// Byte offset of each code point of `utf8`, and the size at the end.
std::vector<size_t> CodePointStarts(const std::string& utf8);
// Characters [begin, end) of `utf8` (clamped to it).
std::string CodePointSlice(const std::string& utf8, int64_t begin, int64_t end);

// The official script's normalize_answer (evaluate-v1.1.py), exactly:
// str.lower() (full case mapping), string.punctuation (ASCII) removed,
// re.sub(r'\b(a|an|the)\b', ' ', ...) with Python 3's Unicode-aware \b (an
// article beside a character that is neither letter nor numeral, a curly
// quote or a combining mark, goes; beside a letter of any script it stays),
// then ' '.join(split()) on every character str.isspace() holds for.
std::string NormalizeAnswer(const std::string& text);
// The Python character classes it rests on, exposed for their tests:
// str.isspace(), re's \w, and str.lower().
bool IsPythonSpace(char32_t c);
bool IsPythonWordChar(char32_t c);
std::string PythonLower(const std::string& utf8);
// 1 when the normalized texts are equal; F1 of their normalized words'
// overlap (a bag of words), each the best over the ground truths.
double ExactMatch(const std::string& prediction, const std::vector<std::string>& truths);
double F1Score(const std::string& prediction, const std::vector<std::string>& truths);

// Each feature's best span: start and end token, and its score (the start
// and end logits' sum); start -1 where a feature has none.
struct FeatureSpan {
  int64_t start = -1, end = -1;
  double score = 0.0;
};

// The predictions file ddp_train --predictions-file writes: a header, then
// "feature<TAB>start<TAB>end<TAB>score" per feature, in order.
Status WriteFeatureSpans(const std::string& path, const std::vector<FeatureSpan>& spans);
StatusOr<std::vector<FeatureSpan>> ReadFeatureSpans(const std::string& path);

// Which SQuAD file and questions features were made from: a 64-bit FNV-1a
// hash of every question's id and context, in the file's order, as 16 hex
// digits. make_squad_tensors writes it into the features' metadata under
// kSquadFingerprintKey.
inline constexpr char kSquadFingerprintKey[] = "squad_fingerprint";
std::string SquadFingerprint(const SquadSet& set);
// The features' fingerprint (their safetensors `metadata`'s
// kSquadFingerprintKey) against `set`'s: one line naming `features_name`
// and `squad_name` where the features came from another file, or do not say.
Status CheckFeaturesSource(const SquadSet& set, const std::map<std::string, std::string>& metadata,
                           const std::string& features_name, const std::string& squad_name);

struct SquadScores {
  double exact_match = 0.0, f1 = 0.0;  // percentages over every question
  int64_t questions = 0;
  std::vector<std::string> answers;  // each question's predicted text
};

// The features fit `set`: example_index i64 [N] within its questions, each
// question with a feature, offset_mapping i64 [N, T, 2] within each
// feature's context (or -1 for both ends). Errors name `features_name`.
Status CheckFeatures(const SquadSet& set, const Tensor& example_index, const Tensor& offset_mapping,
                     const std::string& features_name);

// The features' spans back to text (offset_mapping i64 [N, T, 2] into
// their questions' contexts, example_index i64 [N]), the best-scoring
// feature per question, then EM and F1 against its answers. A question
// with no valid span predicts "" (as the official script scores a missing
// prediction). Features that do not fit `set` (an index outside
// it, a question without features) are refused, naming `features_name`.
StatusOr<SquadScores> ScoreSpans(const SquadSet& set, const Tensor& example_index, const Tensor& offset_mapping,
                                 const std::vector<FeatureSpan>& spans, const std::string& features_name);

}  // namespace ddp
