// SQuAD questions to BERT question answering features, as Hugging Face's
// run_qa prepares them: [CLS] question [SEP] context [SEP], padded to the
// sequence length; only the context is cut, into windows that overlap by
// doc_stride tokens; the first answer's characters map to tokens through
// the tokenizer's offsets, and a window that does not hold the whole
// answer labels [CLS] (position 0). The question is cut to max_query_len
// tokens first, as Google's run_squad does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/squad.h"
#include "runtime/safetensors.h"
#include "tools/bert_tokenizer.h"

namespace ddp {

struct SquadFeatureOptions {
  int64_t seq_len = 384;
  int64_t doc_stride = 128;   // tokens shared by consecutive windows
  int64_t max_query_len = 64;
  // Evaluation features add example_index (the question's index in the
  // file) and offset_mapping (each token's characters in the context, -1
  // outside it).
  bool eval = false;
};

struct SquadFeatureCounts {
  int64_t questions = 0, features = 0;
  int64_t without_answer = 0;  // windows labelled [CLS]
};

// input_ids, token_type_ids, attention_mask, start_positions,
// end_positions (i64), and for evaluation example_index and
// offset_mapping. A question that leaves the context no room in a window,
// or a stride as large as that room, is one line naming the question id.
StatusOr<std::vector<NamedTensor>> MakeSquadFeatures(const SquadSet& set, const BertTokenizer& tokenizer,
                                                     const SquadFeatureOptions& options, SquadFeatureCounts* counts);

}  // namespace ddp
