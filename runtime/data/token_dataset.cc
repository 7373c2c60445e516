#include "runtime/data/token_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/data/data_spec.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_shards.h"
#include "runtime/random.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

constexpr int64_t kFirstContent = 1000;  // above BERT's special and unused ids
constexpr int64_t kTopics = 50, kTopicTokens = 8;
constexpr int64_t kContentTokens = kTopics * kTopicTokens;

// Draws for one sample: SplitMix64 of a per-sample base plus a counter.
class SampleDraws {
 public:
  SampleDraws(uint64_t seed, int64_t sample)
      : base_(SplitMix64(seed ^ 0x62657274ull) ^ SplitMix64(static_cast<uint64_t>(sample) + 0x9e37ull)) {}
  uint64_t Next() { return SplitMix64(base_ + counter_++); }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t base_;
  uint64_t counter_ = 0;
};

class SyntheticTokens : public TokenDataset {
 public:
  // Topic z's tokens: assignment_[z * kTopicTokens ...], a seeded shuffle.
  explicit SyntheticTokens(const TokenDataOptions& options)
      : options_(options), assignment_(SeededPermutation(kContentTokens, options.seed ^ 0x5eedull)) {}

  int64_t size() const override { return kEndless; }
  int64_t seq_len() const override { return options_.seq_len; }
  int64_t max_predictions() const override {
    return task() == TokenTask::kPretraining ? MaskedCount(options_.seq_len - 3) : 0;
  }
  TokenTask task() const override {
    if (options_.question_answering) return TokenTask::kQuestionAnswering;
    return options_.classes > 0 ? TokenTask::kClassification : TokenTask::kPretraining;
  }

  TokenBatch Fill(const int64_t* indices, int64_t count, int64_t /*epoch*/) const override {
    const int64_t t = options_.seq_len;
    const bool answer = options_.question_answering;
    const bool classify = options_.classes > 0 || answer;
    std::vector<int64_t> ids(count * t, kPadToken), types(count * t, 0), mask(count * t, 0),
        labels(classify ? count : count * t, -100), nsp(count), starts(count), ends(count);
    for (int64_t b = 0; b < count; ++b) {
      SampleDraws draw(options_.seed, indices[b]);
      const int64_t length = draw.Below(4) == 0 ? t / 2 + draw.Below(t - t / 2) : t;
      const int64_t slots = length - 3, first = slots / 2, second = slots - first;
      int64_t* row = ids.data() + b * t;
      int64_t at = 0;
      row[at++] = kClsToken;
      // A segment's tokens come from its topic, 10% from anywhere.
      auto segment = [&](int64_t n, int64_t topic) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t token = draw.Below(10) == 0 ? draw.Below(kContentTokens)
                                                    : assignment_[topic * kTopicTokens + draw.Below(kTopicTokens)];
          row[at++] = kFirstContent + token;
        }
      };
      const int64_t topic = draw.Below(kTopics);
      segment(first, topic);
      row[at++] = kSepToken;
      const bool is_next = classify || draw.Below(2) == 0;
      nsp[b] = is_next ? 0 : 1;
      const int64_t second_start = at;
      segment(second, is_next ? topic : (topic + 1 + draw.Below(kTopics - 1)) % kTopics);
      row[at++] = kSepToken;
      for (int64_t i = 0; i < length; ++i) {
        mask[b * t + i] = 1;
        types[b * t + i] = i >= second_start ? 1 : 0;
      }
      if (answer) {  // a span of segment B (for speed: nothing to learn)
        starts[b] = second_start + draw.Below(std::max<int64_t>(second, 1));
        ends[b] = std::min(starts[b] + draw.Below(4), second_start + std::max<int64_t>(second, 1) - 1);
        continue;
      }
      if (classify) {
        labels[b] = topic % options_.classes;
        continue;
      }
      // MLM: round(15%) of the content tokens (at least one), drawn
      // without replacement; BERT's 80/10/10.
      std::vector<int64_t> content;
      for (int64_t i = 1; i < length; ++i) {
        if (row[i] >= kFirstContent) content.push_back(i);
      }
      const int64_t wanted = std::min<int64_t>(MaskedCount(static_cast<int64_t>(content.size())),
                                               static_cast<int64_t>(content.size()));
      for (int64_t k = 0; k < wanted; ++k) {
        std::swap(content[k], content[k + draw.Below(static_cast<int64_t>(content.size()) - k)]);
        Mask(draw, row, labels.data() + b * t, content[k]);
      }
    }
    TokenBatch batch;
    batch.input_ids = Tensor::FromVector<int64_t>(ids, {count, t});
    batch.token_type_ids = Tensor::FromVector<int64_t>(types, {count, t});
    batch.attention_mask = Tensor::FromVector<int64_t>(mask, {count, t});
    if (answer) {
      batch.start_positions = Tensor::FromVector<int64_t>(starts, {count});
      batch.end_positions = Tensor::FromVector<int64_t>(ends, {count});
      return batch;
    }
    if (classify) {
      batch.labels = Tensor::FromVector<int64_t>(labels, {count});
      return batch;
    }
    batch.labels = Tensor::FromVector<int64_t>(labels, {count, t});
    batch.next_sentence_label = Tensor::FromVector<int64_t>(nsp, {count});
    return batch;
  }

 private:
  static void Mask(SampleDraws& draw, int64_t* row, int64_t* labels, int64_t i) {
    labels[i] = row[i];
    const int64_t choice = draw.Below(10);
    if (choice < 8) {
      row[i] = kMaskToken;
    } else if (choice == 8) {
      row[i] = kFirstContent + draw.Below(kContentTokens);
    }
  }

  TokenDataOptions options_;
  std::vector<int64_t> assignment_;
};

// A whole set in memory.
class TensorTokens : public TokenDataset {
 public:
  TensorTokens(TokenBatch all, TokenTask task, std::map<std::string, std::string> metadata, int64_t clamped = 0,
               Tensor example_index = Tensor())
      : all_(std::move(all)),
        metadata_(std::move(metadata)),
        task_(task),
        clamped_(clamped),
        max_predictions_(task == TokenTask::kPretraining
                             ? MostMlmLabels(all_.labels.data<int64_t>(), all_.input_ids.dim(0), all_.input_ids.dim(1))
                             : 0),
        example_index_(std::move(example_index)) {}
  int64_t size() const override { return all_.input_ids.dim(0); }
  int64_t seq_len() const override { return all_.input_ids.dim(1); }
  TokenTask task() const override { return task_; }
  Tensor offset_mapping() const override { return all_.offset_mapping; }
  Tensor example_index() const override { return example_index_; }
  std::map<std::string, std::string> metadata() const override { return metadata_; }
  int64_t max_predictions() const override { return max_predictions_; }
  int64_t clamped_positions() const override { return clamped_; }

  TokenBatch Fill(const int64_t* indices, int64_t count, int64_t /*epoch*/) const override {
    const int64_t t = seq_len();
    TokenBatch batch;
    auto gather = [&](const Tensor& from, int64_t width) {
      Shape shape = from.shape();
      shape[0] = count;
      Tensor out = Tensor::Empty(shape, DType::kI64);
      for (int64_t b = 0; b < count; ++b) {
        CHECK(indices[b] >= 0 && indices[b] < size()) << "sample " << indices[b] << " of " << size();
        std::memcpy(out.data<int64_t>() + b * width, from.data<int64_t>() + indices[b] * width,
                    width * sizeof(int64_t));
      }
      return out;
    };
    batch.input_ids = gather(all_.input_ids, t);
    batch.token_type_ids = gather(all_.token_type_ids, t);
    batch.attention_mask = gather(all_.attention_mask, t);
    switch (task_) {
      case TokenTask::kQuestionAnswering:
        batch.start_positions = gather(all_.start_positions, 1);
        batch.end_positions = gather(all_.end_positions, 1);
        if (all_.offset_mapping.defined()) batch.offset_mapping = gather(all_.offset_mapping, 2 * t);
        break;
      case TokenTask::kClassification:
        batch.labels = gather(all_.labels, 1);
        break;
      case TokenTask::kPretraining:
        batch.labels = gather(all_.labels, t);
        batch.next_sentence_label = gather(all_.next_sentence_label, 1);
        break;
    }
    return batch;
  }

 private:
  TokenBatch all_;
  std::map<std::string, std::string> metadata_;
  TokenTask task_;
  int64_t clamped_;
  int64_t max_predictions_;  // pretraining: the most MLM labels a sequence of the file has
  Tensor example_index_;     // question answering evaluation features: as the file holds it
};

// Every element of `t` within [lo, hi) (or equal to `except`), else one
// line naming the file, the tensor, the element and the bound.
Status CheckRange(const std::string& path, const std::string& name, const Tensor& t, int64_t lo, int64_t hi,
                  const std::string& what, int64_t except = std::numeric_limits<int64_t>::min()) {
  const int64_t width = t.ndim() == 2 ? t.dim(1) : 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = t.data<int64_t>()[i];
    if ((v >= lo && v < hi) || v == except) continue;
    const std::string where = t.ndim() == 2 ? "[" + std::to_string(i / width) + ", " + std::to_string(i % width) + "]"
                                            : "[" + std::to_string(i) + "]";
    return InvalidArgument(path + ": tensor '" + name + "' element " + where + " is " + std::to_string(v) +
                           ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + ") " + what);
  }
  return Status::Ok();
}

// A per-sequence tensor: i64 [n].
Status CheckPerSequence(const std::string& path, const std::string& name, const Tensor* t, int64_t n,
                        const std::string& what) {
  if (t == nullptr) return InvalidArgument(path + ": no tensor '" + name + "' (i64 [N]: " + what + ")");
  if (t->dtype() != DType::kI64 || t->shape() != Shape{n}) {
    return InvalidArgument(path + ": tensor '" + name + "' must be i64 [" + std::to_string(n) + "] (" + what +
                           "), got " + DTypeName(t->dtype()) + ShapeToString(t->shape()));
  }
  return Status::Ok();
}

// Question answering features: start_positions and end_positions, and
// offset_mapping where evaluation features carry it. A negative position is
// refused; one past the sequence is clamped to T, which the loss ignores.
StatusOr<std::unique_ptr<TokenDataset>> OpenAnswerSpans(const std::string& path, const SafetensorsContents& contents,
                                                        TokenBatch all) {
  const int64_t n = all.input_ids.dim(0), t = all.input_ids.dim(1);
  int64_t clamped = 0;
  for (const char* name : {"start_positions", "end_positions"}) {
    const Tensor* found = contents.Find(name);
    RETURN_IF_ERROR(CheckPerSequence(path, name, found, n, "the answer's token in each sequence"));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = found->data<int64_t>()[i];
      if (p < 0) {
        return InvalidArgument(path + ": tensor '" + name + "' element [" + std::to_string(i) + "] is " +
                               std::to_string(p) + ": a position cannot be negative");
      }
    }
  }
  // A span ends where it starts or later ([CLS]'s 0, 0 for a window without
  // the answer); one past the sequence is clamped to T, which the loss
  // ignores.
  const int64_t* starts = contents.Find("start_positions")->data<int64_t>();
  const int64_t* ends = contents.Find("end_positions")->data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (starts[i] > ends[i]) {
      return InvalidArgument(path + ": feature " + std::to_string(i) + "'s answer starts at token " +
                             std::to_string(starts[i]) + ", after its end " + std::to_string(ends[i]) +
                             " (start_positions and end_positions swapped?)");
    }
  }
  for (const char* name : {"start_positions", "end_positions"}) {
    Tensor positions = contents.Find(name)->Clone();
    int64_t* p = positions.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (p[i] > t) ++clamped;
      if (p[i] >= t) p[i] = t;
    }
    (std::string(name) == "start_positions" ? all.start_positions : all.end_positions) = positions;
  }
  if (const Tensor* offsets = contents.Find("offset_mapping")) {
    if (offsets->dtype() != DType::kI64 || offsets->shape() != Shape{n, t, 2}) {
      return InvalidArgument(path + ": tensor 'offset_mapping' must be i64 " + ShapeToString({n, t, 2}) +
                             " (each token's characters in its context), got " + DTypeName(offsets->dtype()) +
                             ShapeToString(offsets->shape()));
    }
    all.offset_mapping = *offsets;
  }
  const Tensor* examples = contents.Find("example_index");  // checked against its SQuAD file where one is used
  return std::unique_ptr<TokenDataset>(std::make_unique<TensorTokens>(std::move(all), TokenTask::kQuestionAnswering,
                                                                      contents.metadata, clamped,
                                                                      examples != nullptr ? *examples : Tensor()));
}

StatusOr<std::unique_ptr<TokenDataset>> OpenTokenTensors(const std::string& path, const TokenDataOptions& options) {
  ASSIGN_OR_RETURN(SafetensorsContents contents, ReadSafetensors(path));
  const Tensor* ids = contents.Find("input_ids");
  if (ids == nullptr) return InvalidArgument(path + ": no tensor 'input_ids' (i64 [N, T])");
  if (ids->dtype() != DType::kI64 || ids->ndim() != 2 || ids->dim(0) == 0 || ids->dim(1) == 0) {
    return InvalidArgument(path + ": tensor 'input_ids' must be i64 [N, T] with N, T > 0, got " +
                           DTypeName(ids->dtype()) + ShapeToString(ids->shape()));
  }
  const int64_t n = ids->dim(0), t = ids->dim(1);
  if (options.expect_seq_len > 0 && t != options.expect_seq_len) {
    return InvalidArgument(path + ": tensor 'input_ids' holds sequences of " + std::to_string(t) +
                           " tokens, but --seq-len is " + std::to_string(options.expect_seq_len) +
                           " (features made for another sequence length?)");
  }
  if (t > options.max_positions) {
    return InvalidArgument(path + ": tensor 'input_ids' holds sequences of " + std::to_string(t) +
                           " tokens, longer than " + options.model + "'s " + std::to_string(options.max_positions) +
                           " positions");
  }
  TokenBatch all;
  all.input_ids = *ids;
  auto matrix = [&](const std::string& name, bool required, int64_t fill) -> StatusOr<Tensor> {
    const Tensor* found = contents.Find(name);
    if (found == nullptr) {
      if (required) return InvalidArgument(path + ": no tensor '" + name + "' (i64 [N, T])");
      Tensor filled = Tensor::Empty({n, t}, DType::kI64);
      for (int64_t i = 0; i < n * t; ++i) filled.data<int64_t>()[i] = fill;
      return filled;
    }
    if (found->dtype() != DType::kI64 || found->shape() != Shape{n, t}) {
      return InvalidArgument(path + ": tensor '" + name + "' must be i64 " + ShapeToString({n, t}) +
                             " like input_ids, got " + DTypeName(found->dtype()) + ShapeToString(found->shape()));
    }
    return *found;
  };
  ASSIGN_OR_RETURN(all.token_type_ids, matrix("token_type_ids", false, 0));
  ASSIGN_OR_RETURN(all.attention_mask, matrix("attention_mask", false, 1));
  const std::string vocabulary = "for " + options.model + "'s vocabulary of " + std::to_string(options.vocab_size);
  RETURN_IF_ERROR(CheckRange(path, "input_ids", all.input_ids, 0, options.vocab_size, vocabulary));
  RETURN_IF_ERROR(CheckRange(path, "token_type_ids", all.token_type_ids, 0, options.type_vocab, "(token types)"));
  RETURN_IF_ERROR(CheckRange(path, "attention_mask", all.attention_mask, 0, 2, "(1 attend, 0 padding)"));
  if (options.question_answering) return OpenAnswerSpans(path, contents, std::move(all));
  if (options.classes > 0) {
    // Sequence classification: a label per sequence.
    const Tensor* labels = contents.Find("labels");
    RETURN_IF_ERROR(CheckPerSequence(path, "labels", labels, n, "a class per sequence"));
    all.labels = *labels;
    RETURN_IF_ERROR(CheckRange(path, "labels", all.labels, 0, options.classes,
                               "for --num-classes " + std::to_string(options.classes)));
    return std::unique_ptr<TokenDataset>(
        std::make_unique<TensorTokens>(std::move(all), TokenTask::kClassification, contents.metadata));
  }
  ASSIGN_OR_RETURN(all.labels, matrix("labels", true, 0));
  const Tensor* nsp = contents.Find("next_sentence_label");
  RETURN_IF_ERROR(CheckPerSequence(path, "next_sentence_label", nsp, n, "0 IsNext, 1 NotNext"));
  all.next_sentence_label = *nsp;
  RETURN_IF_ERROR(CheckRange(path, "labels", all.labels, 0, options.vocab_size, vocabulary + " (or -100)", -100));
  RETURN_IF_ERROR(CheckRange(path, "next_sentence_label", all.next_sentence_label, 0, 2, "(0 IsNext, 1 NotNext)"));
  return std::unique_ptr<TokenDataset>(
      std::make_unique<TensorTokens>(std::move(all), TokenTask::kPretraining, contents.metadata));
}

}  // namespace

int64_t MaskedCount(int64_t tokens) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(tokens) * 0.15)));
}

int64_t MostMlmLabels(const int64_t* labels, int64_t count, int64_t t) {
  int64_t most = 1;
  for (int64_t b = 0; b < count; ++b) {
    int64_t labelled = 0;
    for (int64_t i = 0; i < t; ++i) labelled += labels[b * t + i] != -100;
    most = std::max(most, labelled);
  }
  return most;
}

void FindMlmPositions(const int64_t* labels, int64_t count, int64_t t, int64_t per_sequence, int64_t* rows,
                      int64_t* targets) {
  for (int64_t b = 0; b < count; ++b) {
    int64_t k = 0;
    for (int64_t i = 0; i < t; ++i) {
      const int64_t label = labels[b * t + i];
      if (label == -100) continue;
      CHECK_LT(k, per_sequence) << "sequence " << b << " has more MLM labels than the " << per_sequence
                                << " the dataset bounds them by";
      rows[b * per_sequence + k] = b * t + i;
      targets[b * per_sequence + k] = label;
      ++k;
    }
    for (; k < per_sequence; ++k) {
      rows[b * per_sequence + k] = b * t;
      targets[b * per_sequence + k] = -100;
    }
  }
}

StatusOr<std::unique_ptr<TokenDataset>> OpenTokenDataset(const std::string& flag, const std::string& spec,
                                                         const TokenDataOptions& options) {
  if (spec == "synthetic") {
    if (options.seq_len < 8 || options.seq_len > options.max_positions) {
      return InvalidArgument("--seq-len " + std::to_string(options.seq_len) + " is outside [8, " +
                             std::to_string(options.max_positions) + "], " + options.model + "'s positions");
    }
    if (options.vocab_size < kFirstContent + kContentTokens) {
      return InvalidArgument(flag + " synthetic needs a vocabulary of at least " +
                             std::to_string(kFirstContent + kContentTokens) + " tokens");
    }
    return std::unique_ptr<TokenDataset>(std::make_unique<SyntheticTokens>(options));
  }
  if (const std::string file = SpecPath(spec, "tensors:"); !file.empty()) {
    StatusOr<std::unique_ptr<TokenDataset>> opened = OpenTokenTensors(file, options);
    if (!opened.ok()) return Status(opened.status().code(), flag + " " + opened.status().message());
    return opened;
  }
  if (const std::string shards = SpecPath(spec, "tokens:"); !shards.empty()) {
    if (options.classes > 0 || options.question_answering) {
      return InvalidArgument(flag + " '" + spec + "': tokens:PATH is pretraining text; fine-tuning reads "
                             "tensors:FILE");
    }
    return OpenTokenShards(flag, shards, options);
  }
  return InvalidArgument(flag + " '" + spec + "' is not synthetic, tensors:FILE or tokens:PATH");
}

}  // namespace ddp
