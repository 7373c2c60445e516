#include "tools/squad_features.h"

#include <algorithm>

namespace ddp {
namespace {

// The features' columns as they grow.
struct Columns {
  std::vector<int64_t> ids, types, mask, starts, ends, examples, offsets;
  int64_t rows = 0;
};

// One window: [CLS] question [SEP] context[from, to) [SEP], padded; the
// answer's characters [answer_begin, answer_end) labelled where the window
// holds them all, else [CLS].
void AddWindow(const std::vector<uint32_t>& question, const std::vector<BertTokenizer::TokenSpan>& context, int64_t from,
               int64_t to, int64_t answer_begin, int64_t answer_end, int64_t example, const SpecialTokens& special,
               int64_t t, Columns& c, SquadFeatureCounts& counts) {
  const size_t at = c.ids.size();
  c.ids.resize(at + t, special.pad);
  c.types.resize(at + t, 0);
  c.mask.resize(at + t, 0);
  c.offsets.resize(2 * (at + t), -1);
  int64_t k = 0;
  auto put = [&](uint32_t id, int64_t type, int64_t begin, int64_t end) {
    c.ids[at + k] = id;
    c.types[at + k] = type;
    c.mask[at + k] = 1;
    c.offsets[2 * (at + k)] = begin;
    c.offsets[2 * (at + k) + 1] = end;
    ++k;
  };
  put(special.cls, 0, -1, -1);
  for (uint32_t id : question) put(id, 0, -1, -1);
  put(special.sep, 0, -1, -1);
  const int64_t first = k;
  for (int64_t i = from; i < to; ++i) put(context[i].id, 1, context[i].begin, context[i].end);
  const int64_t last = k - 1;
  put(special.sep, 1, -1, -1);
  // run_qa: the first token starting after the answer's start, less one;
  // the last token ending before its end, plus one.
  int64_t start = 0, end = 0;
  if (context[from].begin <= answer_begin && context[to - 1].end >= answer_end) {
    start = first;
    while (start <= last && context[from + start - first].begin <= answer_begin) ++start;
    --start;
    end = last;
    while (end >= first && context[from + end - first].end >= answer_end) --end;
    ++end;
  } else {
    ++counts.without_answer;
  }
  c.starts.push_back(start);
  c.ends.push_back(end);
  c.examples.push_back(example);
  ++c.rows;
}

}  // namespace

StatusOr<std::vector<NamedTensor>> MakeSquadFeatures(const SquadSet& set, const BertTokenizer& tokenizer,
                                                     const SquadFeatureOptions& options, SquadFeatureCounts* counts) {
  const int64_t t = options.seq_len;
  const SpecialTokens special = tokenizer.special();
  Columns c;
  *counts = SquadFeatureCounts();
  std::vector<std::vector<BertTokenizer::TokenSpan>> contexts;
  for (const std::string& context : set.contexts) contexts.push_back(tokenizer.EncodeWithOffsets(context));
  for (size_t e = 0; e < set.questions.size(); ++e) {
    const SquadQuestion& q = set.questions[e];
    std::vector<uint32_t> question = tokenizer.Encode(q.question);
    if (static_cast<int64_t>(question.size()) > options.max_query_len) question.resize(options.max_query_len);
    const int64_t room = t - static_cast<int64_t>(question.size()) - 3;
    if (room <= 0) {
      return InvalidArgument("question '" + q.id + "' takes " + std::to_string(question.size()) +
                             " tokens, leaving its context no room in a window of --seq-len " + std::to_string(t));
    }
    if (options.doc_stride >= room) {
      return InvalidArgument("--doc-stride " + std::to_string(options.doc_stride) + " must be below the " +
                             std::to_string(room) + " context tokens a window holds beside question '" + q.id + "'");
    }
    const std::vector<BertTokenizer::TokenSpan>& context = contexts[q.context];
    if (context.empty()) return InvalidArgument("question '" + q.id + "': its context has no tokens");
    const SquadAnswer& answer = q.answers.front();
    // One past the answer's last character, as run_qa's end_char
    // (CodePointStarts ends with the text's end: one more than its characters).
    const int64_t answer_stop = answer.start + static_cast<int64_t>(CodePointStarts(answer.text).size()) - 1;
    const int64_t n = static_cast<int64_t>(context.size());
    for (int64_t from = 0;; from += room - options.doc_stride) {
      const int64_t to = std::min(n, from + room);
      AddWindow(question, context, from, to, answer.start, answer_stop, static_cast<int64_t>(e), special, t, c, *counts);
      if (to == n) break;
    }
  }
  counts->questions = static_cast<int64_t>(set.questions.size());
  counts->features = c.rows;
  const int64_t n = c.rows;
  std::vector<NamedTensor> out = {{"input_ids", Tensor::FromVector<int64_t>(c.ids, {n, t})},
                                  {"token_type_ids", Tensor::FromVector<int64_t>(c.types, {n, t})},
                                  {"attention_mask", Tensor::FromVector<int64_t>(c.mask, {n, t})},
                                  {"start_positions", Tensor::FromVector<int64_t>(c.starts, {n})},
                                  {"end_positions", Tensor::FromVector<int64_t>(c.ends, {n})}};
  if (options.eval) {
    out.push_back({"example_index", Tensor::FromVector<int64_t>(c.examples, {n})});
    out.push_back({"offset_mapping", Tensor::FromVector<int64_t>(c.offsets, {n, t, 2})});
  }
  return out;
}

}  // namespace ddp
