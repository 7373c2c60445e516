#include "models/bert.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/ops/attention.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/transformer.h"

namespace ddp {

StatusOr<BertConfig> BertConfigFor(const std::string& name) {
  BertConfig c;
  if (name == "bert-tiny") {
    c.layers = 2;
    c.hidden = 128;
    c.heads = 2;
    c.intermediate = 512;
  } else if (name == "bert-base") {
    c.layers = 12;
    c.hidden = 768;
    c.heads = 12;
    c.intermediate = 3072;
  } else if (name == "bert-large") {
    c.layers = 24;
    c.hidden = 1024;
    c.heads = 16;
    c.intermediate = 4096;
  } else {
    return InvalidArgument("unknown BERT model '" + name + "'; use bert-tiny, bert-base or bert-large");
  }
  return c;
}

namespace {

// a + b into a new tensor.
Tensor Added(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::EmptyLike(a);
  Add(ctx, a, b, out);
  return out;
}

}  // namespace

Tensor ModuleContainer::ForwardImpl(ExecutionContext&, const Tensor&) {
  LOG(FATAL) << "a container module is run by its parent";
  return Tensor();
}

Tensor ModuleContainer::BackwardImpl(ExecutionContext&, const Tensor&) {
  LOG(FATAL) << "a container module is run by its parent";
  return Tensor();
}

// ---------------------------------------------------------- embeddings

BertEmbeddings::BertEmbeddings(const BertConfig& config, const StepState* state)
    : state_(state), dropout_(state, 0) {
  word_ = AddChild<EmbeddingLayer>("word_embeddings", config.vocab_size, config.hidden, config.initializer_range,
                                   config.pad_token_id);
  position_ = AddChild<EmbeddingLayer>("position_embeddings", config.max_positions, config.hidden,
                                       config.initializer_range);
  token_type_ = AddChild<EmbeddingLayer>("token_type_embeddings", config.type_vocab, config.hidden,
                                         config.initializer_range);
  layer_norm_ = AddChild<LayerNormLayer>("LayerNorm", config.hidden, config.layer_norm_eps);
}

Tensor BertEmbeddings::Forward(ExecutionContext& ctx, const Tensor& ids, const Tensor* token_types) {
  const int64_t n = ids.dim(0), t = ids.dim(1);
  // Kept while the batch's shape holds ([n * t] ids 0..t-1 per sample).
  if (!positions_.defined() || positions_.shape() != (Shape{n, t}) || positions_.device() != ids.device()) {
    std::vector<int64_t> positions(n * t);
    for (int64_t i = 0; i < n * t; ++i) positions[i] = i % t;
    positions_ = Tensor::FromVector<int64_t>(positions, {n, t}).To(ids.device());
  }
  Tensor types = token_types != nullptr ? *token_types : Tensor::Zeros({n, t}, DType::kI64, ids.device());
  const Tensor words = word_->Forward(ctx, ids);
  // Mixed precision where the word table has a 16-bit copy, read while it
  // is surely there (ZeRO-3 may give it back as the next tables arrive).
  const Parameter& word = *word_->weight();
  const DType low = word.low.defined() ? word.low.dtype() : DType::kF32;
  Tensor summed = Added(ctx, Added(ctx, words, position_->Forward(ctx, positions_)), token_type_->Forward(ctx, types));
  // Mixed precision: the f32 sum is rounded once, and the activations are
  // 16-bit from its LayerNorm on.
  if (low != DType::kF32) {
    Tensor rounded = Tensor::Empty(summed.shape(), low, summed.device());
    CastScaled(ctx, summed, 1.0f, rounded);
    summed = rounded;
  }
  return dropout_.Forward(ctx, layer_norm_->Forward(ctx, summed));
}

void BertEmbeddings::Backward(ExecutionContext& ctx, const Tensor& dy, Tensor tied_word_gradient) {
  Tensor dsum = layer_norm_->Backward(ctx, dropout_.Backward(ctx, dy));
  if (dsum.dtype() != DType::kF32) {  // the tables' gradients are f32
    Tensor widened = Tensor::Empty(dsum.shape(), DType::kF32, dsum.device());
    CastScaled(ctx, dsum, 1.0f, widened);
    dsum = widened;
  }
  token_type_->Backward(ctx, dsum);
  position_->Backward(ctx, dsum);
  word_->AddTiedGradient(std::move(tied_word_gradient));
  word_->Backward(ctx, dsum);
}

// ----------------------------------------------------------- attention

BertSelfAttention::BertSelfAttention(const BertConfig& config, const StepState* state, int64_t site)
    : state_(state), heads_(config.heads), head_dim_(config.hidden / config.heads), site_(site) {
  CHECK_EQ(config.hidden % config.heads, 0) << "hidden " << config.hidden << " is not a multiple of " << config.heads
                                            << " heads";
  query_ = AddChild<LinearLayer>("query", config.hidden, config.hidden, true, config.initializer_range, kHiddenOutput);
  key_ = AddChild<LinearLayer>("key", config.hidden, config.hidden, true, config.initializer_range, kHiddenOutput);
  value_ = AddChild<LinearLayer>("value", config.hidden, config.hidden, true, config.initializer_range, kHiddenOutput);
}

Tensor BertSelfAttention::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  const int64_t n = state_->batch, t = state_->seq;
  const Device device = x.device();
  auto split = [&](const Tensor& rows) {
    Tensor out = Tensor::Empty({n * heads_, t, head_dim_}, rows.dtype(), device);
    SplitHeads(ctx, rows, heads_, out);
    return out;
  };
  const Tensor q = split(query_->Forward(ctx, x));
  const Tensor k = split(key_->Forward(ctx, x));
  const Tensor v = split(value_->Forward(ctx, x));
  Tensor context = Tensor::EmptyLike(q);
  AttentionForward(ctx, q, k, v, n, state_->attention_mask.defined() ? &state_->attention_mask : nullptr,
                   state_->dropout, DropoutKey{state_->seed, state_->step, site_}, state_->first_sample, context,
                   keeps_for_backward() ? &saved_ : nullptr);
  Tensor out = Tensor::EmptyLike(x);
  MergeHeads(ctx, context, heads_, out);
  if (keeps_for_backward()) {
    q_ = q;
    k_ = k;
    v_ = v;
  }
  return out;
}

Tensor BertSelfAttention::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(q_.defined()) << "attention Backward without a training Forward";
  Tensor dcontext = Tensor::Empty(q_.shape(), dy.dtype(), dy.device());
  SplitHeads(ctx, dy, heads_, dcontext);
  Tensor dq = Tensor::EmptyLike(q_), dk = Tensor::EmptyLike(k_), dv = Tensor::EmptyLike(v_);
  AttentionBackward(ctx, q_, k_, v_, saved_, dcontext, dq, dk, dv);
  auto merge = [&](const Tensor& split) {
    Tensor rows = Tensor::EmptyLike(dy);
    MergeHeads(ctx, split, heads_, rows);
    return rows;
  };
  // Value, key, query: the reverse of their registration.
  Tensor dx = value_->Backward(ctx, merge(dv));
  dx = Added(ctx, dx, key_->Backward(ctx, merge(dk)));
  dx = Added(ctx, dx, query_->Backward(ctx, merge(dq)));
  q_ = k_ = v_ = Tensor();
  saved_ = AttentionSaved();
  return dx;
}

BertResidualOutput::BertResidualOutput(int64_t in, const BertConfig& config, const StepState* state, int64_t site)
    : dropout_(state, site) {
  dense_ = AddChild<LinearLayer>("dense", in, config.hidden, true, config.initializer_range, kHiddenOutput);
  layer_norm_ = AddChild<LayerNormLayer>("LayerNorm", config.hidden, config.layer_norm_eps);
}

Tensor BertResidualOutput::Forward(ExecutionContext& ctx, const Tensor& x, const Tensor& residual) {
  return layer_norm_->Forward(ctx, Added(ctx, dropout_.Forward(ctx, dense_->Forward(ctx, x)), residual));
}

Tensor BertResidualOutput::Backward(ExecutionContext& ctx, const Tensor& dy, Tensor* d_residual) {
  *d_residual = layer_norm_->Backward(ctx, dy);
  return dense_->Backward(ctx, dropout_.Backward(ctx, *d_residual));
}

BertAttention::BertAttention(const BertConfig& config, const StepState* state, int64_t first_site) {
  self_ = AddChild<BertSelfAttention>("self", config, state, first_site);
  output_ = AddChild<BertResidualOutput>("output", config.hidden, config, state, first_site + 1);
}

Tensor BertAttention::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  return output_->Forward(ctx, self_->Forward(ctx, x), x);
}

Tensor BertAttention::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  Tensor d_residual;
  const Tensor dcontext = output_->Backward(ctx, dy, &d_residual);
  return Added(ctx, self_->Backward(ctx, dcontext), d_residual);
}

// ---------------------------------------------------------------- layer

namespace {

// intermediate: dense (+ GELU, which BertLayer applies).
class BertIntermediate : public ModuleContainer {
 public:
  explicit BertIntermediate(const BertConfig& config) {
    dense = AddChild<LinearLayer>("dense", config.hidden, config.intermediate, true, config.initializer_range,
                                  kHiddenOutput);
  }
  LinearLayer* dense;
};

}  // namespace

BertLayer::BertLayer(const BertConfig& config, const StepState* state, int64_t index) {
  // Dropout sites: 0 is the embeddings'; three per layer after it.
  const int64_t site = 1 + 3 * index;
  attention_ = AddChild<BertAttention>("attention", config, state, site);
  intermediate_ = AddChild<BertIntermediate>("intermediate", config)->dense;
  output_ = AddChild<BertResidualOutput>("output", config.intermediate, config, state, site + 2);
  set_checkpointing(config.activation_checkpointing);
}

Tensor BertLayer::ForwardImpl(ExecutionContext& ctx, const Tensor& x) {
  const Tensor attended = attention_->Forward(ctx, x);
  const Tensor pre_gelu = intermediate_->Forward(ctx, attended);
  Tensor activated = Tensor::EmptyLike(pre_gelu);
  GeluForward(ctx, pre_gelu, activated);
  if (keeps_for_backward()) pre_gelu_ = pre_gelu;
  return output_->Forward(ctx, activated, attended);
}

Tensor BertLayer::BackwardImpl(ExecutionContext& ctx, const Tensor& dy) {
  CHECK(pre_gelu_.defined()) << "BertLayer Backward without a training Forward";
  Tensor d_attended;
  const Tensor dactivated = output_->Backward(ctx, dy, &d_attended);
  Tensor dpre = Tensor::EmptyLike(pre_gelu_);
  GeluBackward(ctx, pre_gelu_, dactivated, dpre);
  pre_gelu_ = Tensor();
  d_attended = Added(ctx, d_attended, intermediate_->Backward(ctx, dpre));
  return attention_->Backward(ctx, d_attended);
}

// --------------------------------------------------------------- pooler

BertPooler::BertPooler(const BertConfig& config) {
  dense_ = AddChild<LinearLayer>("dense", config.hidden, config.hidden, true, config.initializer_range, kHiddenOutput);
}

Tensor BertPooler::Forward(ExecutionContext& ctx, const Tensor& hidden, int64_t batch, int64_t seq) {
  // Each sequence's first token ([CLS]): rows 0, seq, 2 seq, ... The index
  // is made once per shape, so a step copies nothing from the host (which a
  // captured CUDA graph could not replay).
  if (!first_rows_.defined() || first_rows_.dim(0) != batch || hidden_rows_ != batch * seq ||
      first_rows_.device() != hidden.device()) {
    std::vector<int64_t> rows(static_cast<size_t>(batch));
    for (int64_t n = 0; n < batch; ++n) rows[n] = n * seq;
    first_rows_ = Tensor::FromVector<int64_t>(rows, {batch}).To(hidden.device());
    hidden_rows_ = batch * seq;
  }
  Tensor first = Tensor::Empty({batch, hidden.dim(1)}, hidden.dtype(), hidden.device());
  GatherRows(ctx, hidden, first_rows_, first);
  const Tensor dense = dense_->Forward(ctx, first);
  Tensor pooled = Tensor::EmptyLike(dense);
  TanhForward(ctx, dense, pooled);
  if (keeps_for_backward()) pooled_ = pooled;
  return pooled;
}

Tensor BertPooler::Backward(ExecutionContext& ctx, const Tensor& dpooled) {
  CHECK(pooled_.defined()) << "pooler Backward without a training Forward";
  Tensor ddense = Tensor::EmptyLike(pooled_);
  TanhBackward(ctx, pooled_, dpooled, ddense);
  const Tensor dfirst = dense_->Backward(ctx, ddense);
  Tensor dhidden = Tensor::Empty({hidden_rows_, dfirst.dim(1)}, dfirst.dtype(), dpooled.device());
  ScatterAddRows(ctx, first_rows_, dfirst, dhidden);
  pooled_ = Tensor();
  return dhidden;
}

// ---------------------------------------------------------------- model

namespace {

class BertEncoder : public ModuleContainer {
 public:
  BertEncoder(const BertConfig& config, const StepState* state) {
    layers = AddChild<Sequential>("layer");
    for (int64_t i = 0; i < config.layers; ++i) layers->Append<BertLayer>(config, state, i);
  }
  Sequential* layers;
};

}  // namespace

BertModel::BertModel(const BertConfig& config, const StepState* state, bool with_pooler) {
  embeddings_ = AddChild<BertEmbeddings>("embeddings", config, state);
  layers_ = AddChild<BertEncoder>("encoder", config, state)->layers;
  pooler_ = with_pooler ? AddChild<BertPooler>("pooler", config) : nullptr;
}

BertLossModule::BertLossModule(const BertConfig& config, bool with_pooler) : config_(config) {
  state_.seed = config.seed;
  bert_ = AddChild<BertModel>("bert", config, &state_, with_pooler);
}

void BertLossModule::Encode(ExecutionContext& ctx, const Batch& batch, Tensor* hidden, Tensor* pooled) {
  const Tensor& ids = batch.Get("input_ids");
  CHECK(ids.dtype() == DType::kI64 && ids.ndim() == 2) << "input_ids must be i64 [N, T], got " << ids.DebugString();
  const int64_t n = ids.dim(0), t = ids.dim(1);
  const Tensor* mask = batch.Find("attention_mask");
  state_.attention_mask = mask != nullptr ? *mask : Tensor();
  state_.batch = n;
  state_.seq = t;
  state_.step = batch.step;
  state_.first_sample = batch.first_sample;
  state_.dropout = training() ? config_.dropout : 0.0f;
  const Tensor embedded = bert_->embeddings()->Forward(ctx, ids, batch.Find("token_type_ids"));
  *hidden = bert_->encoder_layers()->Forward(ctx, embedded);
  if (pooled != nullptr) *pooled = bert_->pooler()->Forward(ctx, *hidden, n, t);
}

void BertLossModule::BackwardEncoder(ExecutionContext& ctx, const Tensor& dhidden, const Tensor& dpooled,
                                     Tensor tied_word_gradient) {
  Tensor d = dhidden;
  if (dpooled.defined()) {
    const Tensor dfirst = bert_->pooler()->Backward(ctx, dpooled);
    d = dhidden.defined() ? Added(ctx, dhidden, dfirst) : dfirst;
  }
  const Tensor dembedded = bert_->encoder_layers()->Backward(ctx, d);
  bert_->embeddings()->Backward(ctx, dembedded, std::move(tied_word_gradient));
}

std::string BertLossModule::CaptureBlocker() const {
  if (config_.dropout == 0.0f) return "";
  return "its dropout masks are keyed by the step and the batch's first sample on the host, which a captured graph "
         "would freeze; use eager steps, or --dropout 0";
}

std::string BertLossModule::CanonicalStateName(const std::string& name) const {
  if (name == "bert.embeddings.position_ids") return "";
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("LayerNorm.gamma")) return name.substr(0, name.size() - 5) + "weight";
  if (ends_with("LayerNorm.beta")) return name.substr(0, name.size() - 4) + "bias";
  return name;
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& config, int64_t classes)
    : BertLossModule(config), dropout_(&state_, 1 + 3 * config.layers) {
  classifier_ = AddChild<LinearLayer>("classifier", config.hidden, classes, true, config.initializer_range);
}

Tensor BertForSequenceClassification::Logits(ExecutionContext& ctx, const Batch& batch) {
  Tensor hidden, pooled;
  Encode(ctx, batch, &hidden, &pooled);
  const Tensor logits = classifier_->Forward(ctx, dropout_.Forward(ctx, pooled));
  const Tensor& labels = batch.Get("labels");
  CHECK(labels.dtype() == DType::kI64 && labels.shape() == Shape{state_.batch})
      << "sequence classification labels must be i64 [" << state_.batch << "], got " << labels.DebugString();
  return logits;
}

// The loss is image classification's: cross-entropy, and top-1 accuracy in
// evaluation.
LossResult BertForSequenceClassification::ForwardLoss(ExecutionContext& ctx, const Batch& batch) {
  const Tensor logits = Logits(ctx, batch);
  return loss_.Forward(ctx, logits, batch, training());
}

void BertForSequenceClassification::ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) {
  CHECK(training()) << "BertForSequenceClassification: the device-side loss is a training step's";
  const Tensor logits = Logits(ctx, batch);
  loss_.ForwardToDevice(ctx, logits, batch, stats);
}

LossResult BertForSequenceClassification::ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
  return loss_.Read(ctx, stats, batch);
}

void BertForSequenceClassification::BackwardLoss(ExecutionContext& ctx, double loss_grad) {
  const Tensor& dlogits = loss_.Backward(ctx, loss_grad);
  const Tensor dpooled = dropout_.Backward(ctx, classifier_->Backward(ctx, dlogits));
  BackwardEncoder(ctx, Tensor(), dpooled, Tensor());
}

LossModule::LoadPolicy BertForSequenceClassification::PolicyOnLoad(const std::string& name) const {
  if (name.rfind("cls.", 0) == 0) return LoadPolicy::kDropIfPresent;  // the pretraining heads
  if (name.rfind("classifier.", 0) == 0) return LoadPolicy::kNewIfAbsent;
  return LoadPolicy::kStrict;
}

std::unique_ptr<Layer> BuildBertForSequenceClassification(const BertConfig& config, int64_t classes) {
  return std::make_unique<BertForSequenceClassification>(config, classes);
}

}  // namespace ddp
