// BERT pretraining data: samples of DESIGN.md's named tensors, input_ids,
// token_type_ids, attention_mask (i64 [N, T]), labels (MLM targets, -100
// where ignored, i64 [N, T]) and next_sentence_label (i64 [N]). Sequence
// classification's labels are i64 [N]; question answering has
// start_positions and end_positions (i64 [N]) instead, and evaluation
// features may add offset_mapping (i64 [N, T, 2]: each token's characters
// in its context, -1 outside it; tools/make_squad_tensors writes them).
//
// `synthetic` generates a corpus with learnable structure: 400 content
// tokens in 50 topics of 8; a segment draws its tokens from its topic (10%
// from anywhere), so a masked token is predictable from the rest of its
// segment (1 in 8 at best, against 1 in 400 for the most frequent token);
// segment B shares A's topic (IsNext, label 0) or has another (NotNext,
// label 1); a quarter of the samples are shorter than --seq-len and padded;
// round(15%) of content tokens (at least one) are chosen for MLM, of which
// 80% become [MASK], 10% a random token and 10% stay, as BERT masks. `tensors:FILE`
// holds a whole set, checked on opening: ids within the vocabulary,
// sequences within the positions, shapes alike.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

enum class TokenTask { kPretraining, kClassification, kQuestionAnswering };

struct TokenBatch {
  Tensor input_ids, token_type_ids, attention_mask, labels, next_sentence_label;
  Tensor start_positions, end_positions, offset_mapping;  // question answering (offsets: optional)
};

class TokenDataset {
 public:
  virtual ~TokenDataset() = default;
  static constexpr int64_t kEndless = -1;
  virtual int64_t size() const = 0;
  virtual int64_t seq_len() const = 0;
  virtual TokenTask task() const = 0;
  // Question answering evaluation features' links to their questions, as
  // the file holds them (undefined where it has none): every feature's
  // offset_mapping (i64 [N, T, 2]) and example_index.
  virtual Tensor offset_mapping() const { return Tensor(); }
  virtual Tensor example_index() const { return Tensor(); }
  // The file's safetensors metadata (empty for generated data): question
  // answering features name the SQuAD file they came from there.
  virtual std::map<std::string, std::string> metadata() const { return {}; }
  // Pretraining: the most MLM labels a sequence can have (the MLM head's
  // rows per sequence: mlm_positions); 0 for the fine-tuning tasks.
  virtual int64_t max_predictions() const { return 0; }
  // Question answering: start or end positions past the sequence, clamped
  // to T (which the loss ignores) when the file was opened.
  virtual int64_t clamped_positions() const { return 0; }
  // Host tensors of `count` samples: indices[0..count) of epoch `epoch`
  // (which keys tokens:PATH's pairs and masks; the others ignore it).
  virtual TokenBatch Fill(const int64_t* indices, int64_t count, int64_t epoch = 0) const = 0;
  // Whether filling reads files: worth doing ahead, on the loader thread.
  virtual bool ReadsFiles() const { return false; }
};

struct TokenDataOptions {
  int64_t seq_len = 128;        // synthetic only; a file has its own
  int64_t vocab_size = 30522;   // the model's
  int64_t max_positions = 512;  // the model's
  int64_t type_vocab = 2;
  std::string model = "bert";   // for messages
  uint64_t seed = 1;
  // > 0: sequence classification, labels i64 [N] in [0, classes) and no
  // next_sentence_label. Generated: both segments share a topic, nothing is
  // masked, and the label is the topic modulo `classes`.
  int64_t classes = 0;
  // tensors:FILE of question answering features (start_positions,
  // end_positions) rather than pretraining's.
  bool question_answering = false;
  // > 0: a tensors:FILE must hold sequences of this many tokens (its
  // --seq-len was given).
  int64_t expect_seq_len = 0;
};

// The MLM head's rows, found before the batch goes to its device (a step
// then reads no labels on the host): for each of `count` sequences of `t`
// labels (-100: none), its labelled positions as rows of the batch's hidden
// states (b * t + i) and their labels, padded to `per_sequence` with row
// b * t and label -100. More labels than `per_sequence` is fatal (the
// dataset's max_predictions bounds them).
void FindMlmPositions(const int64_t* labels, int64_t count, int64_t t, int64_t per_sequence, int64_t* rows,
                      int64_t* targets);
// The most labels (not -100) any of `count` sequences of `t` has; at
// least 1 (FindMlmPositions' per_sequence for a batch or file of them).
int64_t MostMlmLabels(const int64_t* labels, int64_t count, int64_t t);

// Masked positions per sequence: round(15%) of `tokens`, at least one.
int64_t MaskedCount(int64_t tokens);

// BERT's special ids (bert-base-uncased's vocabulary).
constexpr int64_t kPadToken = 0, kClsToken = 101, kSepToken = 102, kMaskToken = 103;

// `spec` is "synthetic", "tensors:FILE" or "tokens:PATH" (token_shards.h);
// errors name `flag`, the file and the tensor at fault.
StatusOr<std::unique_ptr<TokenDataset>> OpenTokenDataset(const std::string& flag, const std::string& spec,
                                                         const TokenDataOptions& options);

}  // namespace ddp
