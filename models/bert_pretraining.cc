// BERT's pretraining heads (bert.h): cls.predictions, the MLM decoder tied
// to the word embeddings, and cls.seq_relationship; BertForPreTraining's
// loss over the MLM rows the data source found.
#include "models/bert.h"
#include "runtime/data/token_dataset.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/transformer.h"

namespace ddp {
namespace {

// cls.predictions.transform: dense, GELU, LayerNorm.
class BertPredictionHeadTransform : public ModuleContainer {
 public:
  explicit BertPredictionHeadTransform(const BertConfig& config) {
    dense = AddChild<LinearLayer>("dense", config.hidden, config.hidden, true, config.initializer_range,
                                  kHiddenOutput);
    layer_norm = AddChild<LayerNormLayer>("LayerNorm", config.hidden, config.layer_norm_eps);
  }
  LinearLayer* dense;
  LayerNormLayer* layer_norm;
};

}  // namespace

BertLMPredictionHead::BertLMPredictionHead(const BertConfig& config) {
  bias_ = AddParameter("bias", {config.vocab_size}, true);
  BertPredictionHeadTransform* transform = AddChild<BertPredictionHeadTransform>("transform", config);
  dense_ = transform->dense;
  layer_norm_ = transform->layer_norm;
}

void BertLMPredictionHead::ResetOwnParameters(std::mt19937_64&) { bias_->value.Fill(0.0); }

Tensor BertLMPredictionHead::Forward(ExecutionContext& ctx, const Tensor& hidden, const Parameter& word_embeddings) {
  PrepareForward();
  const Tensor pre_gelu = dense_->Forward(ctx, hidden);
  Tensor activated = Tensor::EmptyLike(pre_gelu);
  GeluForward(ctx, pre_gelu, activated);
  const Tensor transformed = layer_norm_->Forward(ctx, activated);
  Tensor logits = Tensor::Empty({hidden.dim(0), bias_->shape[0]}, DType::kF32, hidden.device());
  // The decoder reads the word embeddings in the activations' dtype (their
  // 16-bit copy in mixed precision); its logits and bias are f32. They are
  // another layer's weights: made current here, just before the read.
  PrepareParameter(*bias_);
  PrepareParameter(word_embeddings);
  LinearForward(ctx, transformed, WeightsFor(word_embeddings, transformed), &bias_->value, logits);
  if (keeps_for_backward()) {
    pre_gelu_ = pre_gelu;
    transformed_ = transformed;
  }
  return logits;
}

Tensor BertLMPredictionHead::Backward(ExecutionContext& ctx, const Tensor& dlogits, const Parameter& word_embeddings,
                                      Tensor* tied_gradient) {
  CHECK(transformed_.defined()) << "MLM head Backward without a training Forward";
  Tensor dtransformed = Tensor::EmptyLike(transformed_);
  PrepareParameter(word_embeddings);
  LinearBackwardData(ctx, dlogits, WeightsFor(word_embeddings, transformed_), &dtransformed);
  *tied_gradient = Tensor::Empty(word_embeddings.shape, DType::kF32, dlogits.device());
  Tensor dbias = Tensor::Empty(bias_->shape, DType::kF32, dlogits.device());
  LinearBackwardWeights(ctx, transformed_, dlogits, *tied_gradient, &dbias);
  const Tensor dactivated = layer_norm_->Backward(ctx, dtransformed);
  Tensor dpre = Tensor::EmptyLike(pre_gelu_);
  GeluBackward(ctx, pre_gelu_, dactivated, dpre);
  const Tensor dhidden = dense_->Backward(ctx, dpre);
  // The bias is registered before the transform: finished after it.
  FinishGradient(ctx, *bias_, dbias);
  pre_gelu_ = transformed_ = Tensor();
  return dhidden;
}

namespace {

// cls: predictions and seq_relationship.
class BertPreTrainingHeads : public ModuleContainer {
 public:
  explicit BertPreTrainingHeads(const BertConfig& config) {
    predictions = AddChild<BertLMPredictionHead>("predictions", config);
    seq_relationship = AddChild<LinearLayer>("seq_relationship", config.hidden, 2, true, config.initializer_range);
  }
  BertLMPredictionHead* predictions;
  LinearLayer* seq_relationship;
};

EvalCount EvalCountOf(const std::string& name, const std::string& label, const Tensor& logits, const Tensor& labels,
                      int64_t ignore) {
  const CorrectCount c = CountCorrect(logits, labels, ignore);
  return EvalCount{name, label, c.correct, c.counted};
}

}  // namespace

BertForPreTraining::BertForPreTraining(const BertConfig& config) : BertLossModule(config) {
  BertPreTrainingHeads* cls = AddChild<BertPreTrainingHeads>("cls", config);
  predictions_ = cls->predictions;
  seq_relationship_ = cls->seq_relationship;
}

void BertForPreTraining::MlmRows(const Batch& batch, int64_t n, int64_t t, const Device& device, Tensor* positions,
                                 Tensor* labels) {
  if (const Tensor* rows = batch.Find("mlm_positions")) {
    *positions = *rows;
    *labels = batch.Get("mlm_labels");
    CHECK(positions->dtype() == DType::kI64 && labels->shape() == positions->shape())
        << "mlm_positions and mlm_labels must be i64 of one shape, got " << positions->DebugString() << " and "
        << labels->DebugString();
    return;
  }
  // A batch made by hand (a test's): its labels scanned here.
  const Tensor host_labels = batch.Get("labels").View(0, {n * t}).To(Device::Cpu());
  const int64_t most = MostMlmLabels(host_labels.data<int64_t>(), n, t);
  Tensor rows = Tensor::Empty({n * most}, DType::kI64), targets = Tensor::Empty({n * most}, DType::kI64);
  FindMlmPositions(host_labels.data<int64_t>(), n, t, most, rows.data<int64_t>(), targets.data<int64_t>());
  *positions = rows.To(device);
  *labels = targets.To(device);
}

void BertForPreTraining::Heads(ExecutionContext& ctx, const Batch& batch, Tensor* mlm_logits, Tensor* nsp_logits) {
  Tensor hidden, pooled;
  Encode(ctx, batch, &hidden, &pooled);
  const int64_t n = state_.batch, t = state_.seq;
  // The MLM head runs on the labelled positions only (NVIDIA's BERT does
  // so), padded to the same count per sequence: the others' loss terms and
  // gradients are zero, and the vocabulary projection is most of the
  // head's cost. A padding row is ignored (label -100); with none labelled
  // the loss is NaN, as Hugging Face's mean over no tokens gives.
  Tensor positions, labels;
  MlmRows(batch, n, t, hidden.device(), &positions, &labels);
  const int64_t m = positions.numel();
  Tensor gathered = Tensor::Empty({m, hidden.dim(1)}, hidden.dtype(), hidden.device());
  GatherRows(ctx, hidden, positions, gathered);
  *mlm_logits = predictions_->Forward(ctx, gathered, *bert_->embeddings()->word_embeddings()->weight());
  *nsp_logits = seq_relationship_->Forward(ctx, pooled);
  mlm_positions_ = positions;
  hidden_rows_ = n * t;
  mlm_labels_ = labels;
  nsp_labels_ = batch.Get("next_sentence_label");
  mlm_probs_ = Tensor::EmptyLike(*mlm_logits);
  nsp_probs_ = Tensor::EmptyLike(*nsp_logits);
}

LossResult BertForPreTraining::ForwardLoss(ExecutionContext& ctx, const Batch& batch) {
  Tensor mlm_logits, nsp_logits;
  Heads(ctx, batch, &mlm_logits, &nsp_logits);
  CrossEntropyParams ce;  // ignore_index -100, as the MLM labels use
  const CrossEntropyResult mlm = SoftmaxCrossEntropyForward(ctx, ce, mlm_logits, mlm_labels_, mlm_probs_);
  const CrossEntropyResult nsp = SoftmaxCrossEntropyForward(ctx, ce, nsp_logits, nsp_labels_, nsp_probs_);
  LossResult result;
  result.loss = mlm.loss + nsp.loss;
  // Counted in evaluation only: they read the logits on the host.
  if (!training()) {
    result.counts = {EvalCountOf("mlm", "MLM accuracy", mlm_logits, mlm_labels_, ce.ignore_index),
                     EvalCountOf("nsp", "NSP accuracy", nsp_logits, nsp_labels_, ce.ignore_index)};
    mlm_positions_ = mlm_labels_ = nsp_labels_ = mlm_probs_ = nsp_probs_ = Tensor();
  }
  return result;
}

void BertForPreTraining::ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) {
  CHECK(training()) << "BertForPreTraining: the device-side loss is a training step's";
  CHECK(batch.Find("mlm_positions") != nullptr)
      << "BertForPreTraining: a step on the device needs the data source's mlm_positions";
  Tensor mlm_logits, nsp_logits;
  Heads(ctx, batch, &mlm_logits, &nsp_logits);
  CrossEntropyParams ce;
  Tensor mlm_stats = stats.View(0, {3}), nsp_stats = stats.View(3, {3});
  SoftmaxCrossEntropyForwardToDevice(ctx, ce, mlm_logits, mlm_labels_, mlm_probs_, mlm_stats);
  SoftmaxCrossEntropyForwardToDevice(ctx, ce, nsp_logits, nsp_labels_, nsp_probs_, nsp_stats);
}

LossResult BertForPreTraining::ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
  LossResult result;
  result.loss = CrossEntropyResultOf(ctx, stats.View(0, {3}), batch.Get("mlm_labels"), config_.vocab_size).loss +
                CrossEntropyResultOf(ctx, stats.View(3, {3}), batch.Get("next_sentence_label"), 2).loss;
  return result;
}

void BertForPreTraining::BackwardLoss(ExecutionContext& ctx, double loss_grad) {
  CHECK(mlm_probs_.defined()) << "BertForPreTraining: BackwardLoss without a training ForwardLoss";
  CrossEntropyParams ce;
  // The heads in the reverse of their registration: seq_relationship, then
  // the MLM head, then the pooler; then the encoder and the embeddings.
  Tensor dnsp = Tensor::EmptyLike(nsp_probs_);
  SoftmaxCrossEntropyBackward(ctx, ce, nsp_probs_, nsp_labels_, loss_grad, dnsp);
  const Tensor dpooled = seq_relationship_->Backward(ctx, dnsp);
  Tensor dlogits = Tensor::EmptyLike(mlm_probs_);
  SoftmaxCrossEntropyBackward(ctx, ce, mlm_probs_, mlm_labels_, loss_grad, dlogits);
  mlm_probs_ = nsp_probs_ = Tensor();
  const Parameter& words = *bert_->embeddings()->word_embeddings()->weight();
  Tensor tied;
  const Tensor dgathered = predictions_->Backward(ctx, dlogits, words, &tied);
  dlogits = Tensor();
  Tensor dhidden_mlm = Tensor::Empty({hidden_rows_, dgathered.dim(1)}, dgathered.dtype(), dgathered.device());
  ScatterAddRows(ctx, mlm_positions_, dgathered, dhidden_mlm);  // scattered back to their rows
  mlm_positions_ = Tensor();
  BackwardEncoder(ctx, dhidden_mlm, dpooled, std::move(tied));
}

std::vector<StateAlias> BertForPreTraining::StateAliases() const {
  return {{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight",
           "cls.predictions.transform.LayerNorm.bias"},
          {"cls.predictions.decoder.bias", "cls.predictions.bias", "cls.predictions.decoder.weight"}};
}

std::unique_ptr<Layer> BuildBertForPreTraining(const BertConfig& config) {
  return std::make_unique<BertForPreTraining>(config);
}

}  // namespace ddp
