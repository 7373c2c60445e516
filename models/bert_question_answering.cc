#include "models/bert_question_answering.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "runtime/ops/loss.h"
#include "runtime/ops/transformer.h"

namespace ddp {

BertForQuestionAnswering::BertForQuestionAnswering(const BertConfig& config)
    : BertLossModule(config, /*with_pooler=*/false) {
  qa_outputs_ = AddChild<LinearLayer>("qa_outputs", config.hidden, 2, true, config.initializer_range);
}

void BertForQuestionAnswering::Buffers::Prepare(int64_t batch, int64_t seq, const Device& device) {
  if (order.defined() && batch == n && seq == t && order.device() == device) return;
  n = batch;
  t = seq;
  std::vector<int64_t> rows(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    rows[i] = 2 * i;
    rows[n + i] = 2 * i + 1;
  }
  order = Tensor::FromVector<int64_t>(rows, {2 * n}).To(device);
  split = Tensor::Empty({2 * n, t, 1}, DType::kF32, device);
  dsplit = Tensor::Empty({2 * n, t, 1}, DType::kF32, device);
  ordered = Tensor::Empty({2 * n, t}, DType::kF32, device);
  probs = Tensor::Empty({2 * n, t}, DType::kF32, device);
  dordered = Tensor::Empty({2 * n, t}, DType::kF32, device);
}

void BertForQuestionAnswering::Logits(ExecutionContext& ctx, const Batch& batch, Buffers& b) {
  Tensor hidden;
  Encode(ctx, batch, &hidden, nullptr);
  const int64_t n = state_.batch, t = state_.seq;
  for (const char* name : {"start_positions", "end_positions"}) {
    const Tensor& p = batch.Get(name);
    CHECK(p.dtype() == DType::kI64 && p.shape() == Shape{n}) << "question answering's " << name << " must be i64 ["
                                                              << n << "], got " << p.DebugString();
  }
  b.Prepare(n, t, hidden.device());
  const Tensor logits = qa_outputs_->Forward(ctx, hidden);  // [N * T, 2]
  SplitHeads(ctx, logits, 2, b.split);
  GatherRows(ctx, b.split.View(0, {2 * n, t}), b.order, b.ordered);
}

namespace {

// The start and the end cross-entropy: ignore the clamped position T.
CrossEntropyParams PositionsLoss(int64_t t) {
  CrossEntropyParams ce;
  ce.ignore_index = t;
  return ce;
}

// Evaluation on the host: each feature's best span as sample_outputs, and
// how many of the labelled ones it gets exactly.
void ReadSpans(const Tensor& ordered, const Batch& batch, LossResult& result) {
  const int64_t n = ordered.dim(0) / 2, t = ordered.dim(1);
  const Tensor logits = ordered.To(Device::Cpu());
  const Tensor starts = batch.Get("start_positions").To(Device::Cpu());
  const Tensor ends = batch.Get("end_positions").To(Device::Cpu());
  const Tensor* offsets_found = batch.Find("offset_mapping");
  const Tensor* mask_found = batch.Find("attention_mask");
  const Tensor offsets = offsets_found != nullptr ? offsets_found->To(Device::Cpu()) : Tensor();
  const Tensor mask = mask_found != nullptr ? mask_found->To(Device::Cpu()) : Tensor();
  result.sample_outputs = Tensor::Empty({n, 3}, DType::kF64);
  double* out = result.sample_outputs.data<double>();
  EvalCount spans{"span", "exact span", 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const AnswerSpan best = BestSpan(logits.data<float>() + i * t, logits.data<float>() + (n + i) * t, t,
                                     offsets.defined() ? offsets.data<int64_t>() + i * t * 2 : nullptr,
                                     mask.defined() ? mask.data<int64_t>() + i * t : nullptr);
    out[3 * i] = static_cast<double>(best.start);
    out[3 * i + 1] = static_cast<double>(best.end);
    out[3 * i + 2] = best.score;
    const int64_t s = starts.data<int64_t>()[i], e = ends.data<int64_t>()[i];
    // Counted: windows that hold their answer (not clamped away, not [CLS]:
    // SQuAD v1.1 questions all have one, elsewhere in their context).
    if (s == t || e == t || (s == 0 && e == 0)) continue;
    ++spans.counted;
    if (best.start == s && best.end == e) ++spans.correct;
  }
  result.counts = {spans};
}

}  // namespace

LossResult BertForQuestionAnswering::ForwardLoss(ExecutionContext& ctx, const Batch& batch) {
  Buffers local;
  Buffers& b = training() ? train_ : local;
  Logits(ctx, batch, b);
  const CrossEntropyParams ce = PositionsLoss(b.t);
  Tensor start_probs = b.start(b.probs), end_probs = b.end(b.probs);
  const CrossEntropyResult start =
      SoftmaxCrossEntropyForward(ctx, ce, b.start(b.ordered), batch.Get("start_positions"), start_probs);
  const CrossEntropyResult end =
      SoftmaxCrossEntropyForward(ctx, ce, b.end(b.ordered), batch.Get("end_positions"), end_probs);
  LossResult result;
  result.loss = (start.loss + end.loss) / 2.0;
  if (training()) {
    start_labels_ = batch.Get("start_positions");
    end_labels_ = batch.Get("end_positions");
  } else {
    ReadSpans(b.ordered, batch, result);
  }
  return result;
}

void BertForQuestionAnswering::ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) {
  CHECK(training()) << "BertForQuestionAnswering: the device-side loss is a training step's";
  Buffers& b = train_;
  Logits(ctx, batch, b);
  const CrossEntropyParams ce = PositionsLoss(b.t);
  start_labels_ = batch.Get("start_positions");
  end_labels_ = batch.Get("end_positions");
  Tensor start_probs = b.start(b.probs), end_probs = b.end(b.probs);
  Tensor start_stats = stats.View(0, {3}), end_stats = stats.View(3, {3});
  SoftmaxCrossEntropyForwardToDevice(ctx, ce, b.start(b.ordered), start_labels_, start_probs, start_stats);
  SoftmaxCrossEntropyForwardToDevice(ctx, ce, b.end(b.ordered), end_labels_, end_probs, end_stats);
}

LossResult BertForQuestionAnswering::ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
  LossResult result;
  const int64_t t = train_.t;
  const double start = CrossEntropyResultOf(ctx, stats.View(0, {3}), batch.Get("start_positions"), t).loss;
  const double end = CrossEntropyResultOf(ctx, stats.View(3, {3}), batch.Get("end_positions"), t).loss;
  result.loss = (start + end) / 2.0;
  return result;
}

void BertForQuestionAnswering::BackwardLoss(ExecutionContext& ctx, double loss_grad) {
  CHECK(start_labels_.defined()) << "BertForQuestionAnswering: BackwardLoss without a training ForwardLoss";
  Buffers& b = train_;
  const CrossEntropyParams ce = PositionsLoss(b.t);
  // Each cross-entropy is half the loss.
  Tensor dstart = b.start(b.dordered), dend = b.end(b.dordered);
  SoftmaxCrossEntropyBackward(ctx, ce, b.start(b.probs), start_labels_, loss_grad / 2.0, dstart);
  SoftmaxCrossEntropyBackward(ctx, ce, b.end(b.probs), end_labels_, loss_grad / 2.0, dend);
  Tensor dsplit_rows = b.dsplit.View(0, {2 * b.n, b.t});
  ScatterAddRows(ctx, b.order, b.dordered, dsplit_rows);
  Tensor dlogits = Tensor::Empty({b.n * b.t, 2}, DType::kF32, b.dordered.device());
  MergeHeads(ctx, b.dsplit, 2, dlogits);
  const Tensor dhidden = qa_outputs_->Backward(ctx, dlogits);
  start_labels_ = end_labels_ = Tensor();
  BackwardEncoder(ctx, dhidden, Tensor(), Tensor());
}

LossModule::LoadPolicy BertForQuestionAnswering::PolicyOnLoad(const std::string& name) const {
  // The pretraining heads, and the pooler this head does without.
  if (name.rfind("cls.", 0) == 0 || name.rfind("bert.pooler.", 0) == 0) return LoadPolicy::kDropIfPresent;
  if (name.rfind("qa_outputs.", 0) == 0) return LoadPolicy::kNewIfAbsent;
  return LoadPolicy::kStrict;
}

AnswerSpan BestSpan(const float* start_logits, const float* end_logits, int64_t t, const int64_t* offsets,
                    const int64_t* mask, int n_best, int64_t max_length) {
  auto valid = [&](int64_t i) {
    if (offsets != nullptr) return offsets[2 * i] >= 0;
    return mask == nullptr || mask[i] != 0;
  };
  // The n_best highest logits' positions, highest first (ties: the earlier).
  auto top = [&](const float* logits) {
    std::vector<int64_t> order(static_cast<size_t>(t));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min<int64_t>(n_best, t);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    order.resize(static_cast<size_t>(k));
    return order;
  };
  const std::vector<int64_t> starts = top(start_logits), ends = top(end_logits);
  AnswerSpan best;
  for (const int64_t s : starts) {
    for (const int64_t e : ends) {
      if (!valid(s) || !valid(e) || e < s || e - s + 1 > max_length) continue;
      const double score = static_cast<double>(start_logits[s]) + static_cast<double>(end_logits[e]);
      if (score > best.score) best = AnswerSpan{s, e, score};
    }
  }
  return best;
}

std::unique_ptr<Layer> BuildBertForQuestionAnswering(const BertConfig& config) {
  return std::make_unique<BertForQuestionAnswering>(config);
}

}  // namespace ddp
