// BERT (Devlin et al., 2019) for pretraining: masked language modelling
// plus next-sentence prediction, with Hugging Face's BertForPreTraining
// module structure and therefore its parameter names
// ("bert.encoder.layer.0.attention.self.query.weight",
// "cls.predictions.transform.LayerNorm.bias", ...). The MLM decoder is tied
// to the word embeddings (its bias is "cls.predictions.bias"), so the model
// holds each once. Hidden states are [N * T, hidden], rows sample-major.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/layers/classification_loss.h"
#include "runtime/layers/dropout_site.h"
#include "runtime/layers/linear_layer.h"
#include "runtime/layers/loss_module.h"
#include "runtime/layers/sequential.h"
#include "runtime/layers/transformer_layers.h"
#include "runtime/ops/attention.h"
#include "runtime/status.h"

namespace ddp {

// The linear layers inside the model keep a 16-bit input's dtype (mixed
// precision: 16-bit activations from the embeddings' LayerNorm to the
// heads); the heads' logits are f32, for the losses.
inline constexpr LinearOutput kHiddenOutput = LinearOutput::kInputDType;

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  int64_t max_positions = 512;
  int64_t type_vocab = 2;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  int64_t pad_token_id = 0;
  // Hidden and attention dropout, applied in training mode.
  float dropout = 0.1f;
  // Each encoder layer keeps only its input in forward and recomputes its
  // activations in backward (the same dropout masks: they are a function of
  // the step, the site and the samples).
  bool activation_checkpointing = false;
  uint64_t seed = 1;  // dropout masks: with the step, the site and the global sample
};

// bert-tiny (2 layers, hidden 128, 2 heads, intermediate 512), bert-base
// (12/768/12/3072) and bert-large (24/1024/16/4096); anything else is an
// InvalidArgument naming them.
StatusOr<BertConfig> BertConfigFor(const std::string& name);

// A module that only holds children, for Hugging Face's names; its parent
// runs them.
class ModuleContainer : public Layer {
 protected:
  Tensor ForwardImpl(ExecutionContext&, const Tensor&) override;
  Tensor BackwardImpl(ExecutionContext&, const Tensor&) override;
};

class BertEmbeddings : public ModuleContainer {
 public:
  BertEmbeddings(const BertConfig& config, const StepState* state);
  // ids and token types i64 [N, T] (types may be null: all 0).
  Tensor Forward(ExecutionContext& ctx, const Tensor& ids, const Tensor* token_types);
  // `tied_word_gradient` ([V, H]) is added to the word embeddings' gradient.
  void Backward(ExecutionContext& ctx, const Tensor& dy, Tensor tied_word_gradient);
  EmbeddingLayer* word_embeddings() { return word_; }

 private:
  const StepState* state_;
  EmbeddingLayer *word_, *position_, *token_type_;
  LayerNormLayer* layer_norm_;
  DropoutSite dropout_;
  Tensor positions_;  // i64 [N * T]: t for each row
};

class BertSelfAttention : public Layer {
 public:
  BertSelfAttention(const BertConfig& config, const StepState* state, int64_t site);

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  const StepState* state_;
  int64_t heads_, head_dim_;
  int64_t site_;  // the attention probabilities' dropout site
  LinearLayer *query_, *key_, *value_;
  Tensor q_, k_, v_;     // [N * heads, T, d]
  AttentionSaved saved_;  // the probabilities and their dropout (runtime/ops/attention.h)
};

// dense -> dropout -> LayerNorm(+ the residual): BertSelfOutput and
// BertOutput.
class BertResidualOutput : public ModuleContainer {
 public:
  BertResidualOutput(int64_t in, const BertConfig& config, const StepState* state, int64_t site);
  Tensor Forward(ExecutionContext& ctx, const Tensor& x, const Tensor& residual);
  // Returns the gradient of x; *d_residual gets the residual's.
  Tensor Backward(ExecutionContext& ctx, const Tensor& dy, Tensor* d_residual);

 private:
  LinearLayer* dense_;
  LayerNormLayer* layer_norm_;
  DropoutSite dropout_;
};

class BertAttention : public Layer {
 public:
  BertAttention(const BertConfig& config, const StepState* state, int64_t first_site);

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  BertSelfAttention* self_;
  BertResidualOutput* output_;
};

class BertLayer : public Layer {
 public:
  BertLayer(const BertConfig& config, const StepState* state, int64_t index);

 protected:
  Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) override;
  Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) override;

 private:
  BertAttention* attention_;
  LinearLayer* intermediate_;  // intermediate.dense
  BertResidualOutput* output_;
  Tensor pre_gelu_;
};

// tanh(dense(first token)).
class BertPooler : public ModuleContainer {
 public:
  BertPooler(const BertConfig& config);
  Tensor Forward(ExecutionContext& ctx, const Tensor& hidden, int64_t batch, int64_t seq);
  // The gradient of the hidden states (zero but for each first token).
  Tensor Backward(ExecutionContext& ctx, const Tensor& dpooled);

 private:
  LinearLayer* dense_;
  Tensor pooled_;
  Tensor first_rows_;          // i64 [batch]: each sequence's first row of the hidden states
  int64_t hidden_rows_ = 0;    // batch x seq, for first_rows_
};

class BertModel : public ModuleContainer {
 public:
  // Without the pooler for question answering (Hugging Face's
  // add_pooling_layer=False): pooler() is then null.
  BertModel(const BertConfig& config, const StepState* state, bool with_pooler = true);
  BertEmbeddings* embeddings() { return embeddings_; }
  Sequential* encoder_layers() { return layers_; }
  BertPooler* pooler() { return pooler_; }

 private:
  BertEmbeddings* embeddings_;
  Sequential* layers_;  // encoder.layer
  BertPooler* pooler_;
};

// cls.predictions: transform (dense, GELU, LayerNorm), then the decoder tied
// to the word embeddings, with a bias of its own.
class BertLMPredictionHead : public ModuleContainer {
 public:
  BertLMPredictionHead(const BertConfig& config);
  // logits [R, V] from hidden [R, H] and the word embeddings.
  Tensor Forward(ExecutionContext& ctx, const Tensor& hidden, const Parameter& word_embeddings);
  // The hidden states' gradient; *tied_gradient gets the decoder weight's
  // ([V, H]), which the word embeddings add to theirs.
  Tensor Backward(ExecutionContext& ctx, const Tensor& dlogits, const Parameter& word_embeddings,
                  Tensor* tied_gradient);

 protected:
  void ResetOwnParameters(std::mt19937_64& rng) override;

 private:
  Parameter* bias_;
  LinearLayer* dense_;
  LayerNormLayer* layer_norm_;
  Tensor pre_gelu_, transformed_;
};

// The root: "bert" and "cls" (predictions, seq_relationship). The loss is
// masked-LM cross-entropy (labels -100 ignored, mean over the rest) plus
// next-sentence cross-entropy, as BertForPreTraining computes it.
// What BERT's heads share: "bert" (embeddings, encoder, pooler), the step
// state its layers read, the older spellings of its checkpoints.
class BertLossModule : public LossModule {
 public:
  const BertConfig& config() const { return config_; }
  // Older files spell LayerNorm's weight and bias gamma and beta, and carry
  // the bert.embeddings.position_ids buffer.
  std::string CanonicalStateName(const std::string& name) const override;
  // Training-mode dropout keys its masks by the step and the batch's first
  // sample, which a captured graph would freeze.
  std::string CaptureBlocker() const override;

 protected:
  explicit BertLossModule(const BertConfig& config, bool with_pooler = true);
  // Embeddings, encoder and pooler over the batch: hidden [N * T, H],
  // pooled [N, H] (`pooled` null without a pooler).
  void Encode(ExecutionContext& ctx, const Batch& batch, Tensor* hidden, Tensor* pooled);
  // Backward from the hidden states' gradient (or none) and the pooled
  // output's (or none: no pooler), the pooler first; the word embeddings
  // add `tied_word_gradient` (or nothing) to theirs.
  void BackwardEncoder(ExecutionContext& ctx, const Tensor& dhidden, const Tensor& dpooled,
                       Tensor tied_word_gradient);

  BertConfig config_;
  StepState state_;
  BertModel* bert_;
};

class BertForPreTraining : public BertLossModule {
 public:
  explicit BertForPreTraining(const BertConfig& config);
  // Batch tensors: input_ids, token_type_ids (optional), attention_mask
  // (optional), labels (MLM targets), next_sentence_label, and the MLM
  // head's rows, mlm_positions and mlm_labels (i64 [N * P]: FindMlmPositions
  // in runtime/data/token_dataset.h; the data source finds them before
  // upload, and a batch without them has its labels read on the host).
  // Counts: "mlm" (masked tokens predicted) and "nsp".
  LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch) override;
  void BackwardLoss(ExecutionContext& ctx, double loss_grad) override;
  // The loss with its figures left on the device (a CUDA graph's step):
  // the MLM and the NSP cross-entropy's sums and counts. Needs the batch's
  // mlm_positions.
  int64_t loss_stats_size() const override { return 6; }
  void ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) override;
  LossResult ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) override;
  // BertForPreTraining.state_dict() repeats the tied decoder:
  // cls.predictions.decoder.weight (the word embeddings) and .bias
  // (cls.predictions.bias).
  std::vector<StateAlias> StateAliases() const override;

 private:
  // The MLM head's rows of the hidden states and their labels.
  void MlmRows(const Batch& batch, int64_t n, int64_t t, const Device& device, Tensor* positions, Tensor* labels);
  // Encoder and both heads: the MLM logits [M, V] over those rows and the
  // NSP logits [N, 2]; what backward needs is kept.
  void Heads(ExecutionContext& ctx, const Batch& batch, Tensor* mlm_logits, Tensor* nsp_logits);

  BertLMPredictionHead* predictions_;
  LinearLayer* seq_relationship_;
  Tensor mlm_positions_;  // i64 [M]: the rows of the hidden states the MLM head ran on
  int64_t hidden_rows_ = 0;
  Tensor mlm_labels_, nsp_labels_, mlm_probs_, nsp_probs_;
};

// BertForSequenceClassification: "bert", then dropout and "classifier"
// (hidden -> classes) on the pooled output; cross-entropy against labels
// i64 [N]. Fine-tuning starts from pretraining weights: the pretraining
// heads (cls.*) are dropped on loading and the classifier starts fresh.
class BertForSequenceClassification : public BertLossModule {
 public:
  BertForSequenceClassification(const BertConfig& config, int64_t classes);
  // Batch tensors: input_ids, token_type_ids and attention_mask (optional),
  // labels. Counts: "accuracy".
  LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch) override;
  void BackwardLoss(ExecutionContext& ctx, double loss_grad) override;
  // The loss with its figures left on the device (a CUDA graph's step):
  // classification_loss's device-side path.
  int64_t loss_stats_size() const override { return loss_.stats_size(); }
  void ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) override;
  LossResult ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) override;
  LoadPolicy PolicyOnLoad(const std::string& name) const override;

 private:
  // Encoder, pooler, dropout and classifier: logits [N, classes].
  Tensor Logits(ExecutionContext& ctx, const Batch& batch);

  LinearLayer* classifier_;
  DropoutSite dropout_;
  SoftmaxClassificationLoss loss_{/*label_smoothing=*/0.0};
};

std::unique_ptr<Layer> BuildBertForPreTraining(const BertConfig& config);
std::unique_ptr<Layer> BuildBertForSequenceClassification(const BertConfig& config, int64_t classes);

}  // namespace ddp
