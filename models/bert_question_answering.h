// BERT for extractive question answering (SQuAD): Hugging Face's
// BertForQuestionAnswering, its names and its loss, and run_qa's choice of
// the best answer span from the start and end logits.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "models/bert.h"

namespace ddp {

// "bert" without its pooler (Hugging Face builds it with
// add_pooling_layer=False), then "qa_outputs" (hidden -> 2) on every token:
// the start and end logits [N, T]. The loss is the mean of the start and
// end cross-entropies over the batch's start_positions and end_positions
// (i64 [N]); a position equal to T is ignored (the data clamps positions
// past the sequence to T, as Hugging Face clamps and then ignores them).
// Fine-tuning starts from pretraining weights: cls.* and bert.pooler.* are
// dropped on loading and qa_outputs starts fresh.
class BertForQuestionAnswering : public BertLossModule {
 public:
  explicit BertForQuestionAnswering(const BertConfig& config);
  // Batch tensors: input_ids, token_type_ids and attention_mask (optional),
  // start_positions, end_positions, and in evaluation offset_mapping
  // (optional, i64 [N, T, 2], -1 for a token outside the context). Counts:
  // "span" (the best span is the labelled one, among the features whose
  // window holds their answer: not labelled [CLS]). Evaluation's
  // sample_outputs: each feature's best span (BestSpan), f64 [N, 3].
  LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch) override;
  void BackwardLoss(ExecutionContext& ctx, double loss_grad) override;
  // The loss with its figures left on the device (a CUDA graph's step):
  // the start and the end cross-entropy's sums and counts.
  int64_t loss_stats_size() const override { return 6; }
  void ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) override;
  LossResult ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) override;
  LoadPolicy PolicyOnLoad(const std::string& name) const override;

 private:
  // What a batch of N features of T tokens runs through. Training keeps
  // its buffers while the shape holds (a captured CUDA graph holds their
  // addresses); evaluation has buffers of its own.
  struct Buffers {
    void Prepare(int64_t n, int64_t t, const Device& device);
    Tensor start(const Tensor& rows) const { return rows.View(0, {n, t}); }
    Tensor end(const Tensor& rows) const { return rows.View(n * t, {n, t}); }
    int64_t n = 0, t = 0;
    Tensor order;                     // i64 [2N]: 0, 2, .., 2N-2, then 1, 3, .., 2N-1
    Tensor split, dsplit;             // [2N, T, 1]: row 2n feature n's start logits, 2n + 1 its end logits
    Tensor ordered, probs, dordered;  // [2N, T]: the starts, then the ends (`order`'s rows of `split`)
  };
  // Encoder and qa_outputs into `b`; the batch's positions are checked.
  void Logits(ExecutionContext& ctx, const Batch& batch, Buffers& b);

  LinearLayer* qa_outputs_;
  Buffers train_;
  Tensor start_labels_, end_labels_;
};

// run_qa's post-processing of one feature: among the n_best highest start
// logits and the n_best highest end logits, the pair with start <= end,
// at most max_length tokens, both tokens valid, of the highest
// start + end logit. A token is valid where offsets (i64 [T, 2], or null)
// is not negative, else where mask (or null: every token) is not 0. No
// valid pair: start = end = -1, score -infinity.
struct AnswerSpan {
  int64_t start = -1, end = -1;
  double score = -std::numeric_limits<double>::infinity();
};
AnswerSpan BestSpan(const float* start_logits, const float* end_logits, int64_t t, const int64_t* offsets,
                    const int64_t* mask, int n_best = 20, int64_t max_length = 30);

std::unique_ptr<Layer> BuildBertForQuestionAnswering(const BertConfig& config);

}  // namespace ddp
