#include "runtime/data/batch_source.h"

#include <cstring>

#include "runtime/ops/elementwise.h"

namespace ddp {

void BatchSource::FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Batch& batch) const {
  (void)ctx, (void)first, (void)batch;
  LOG(FATAL) << "this data is read on the host";
}

Batch AllocateBatch(const BatchSource& source, int64_t count, Device device, Allocator* allocator) {
  Batch batch;
  for (const TensorSpec& spec : source.Specs(count)) {
    batch.tensors.emplace_back(spec.name, allocator != nullptr ? Tensor::EmptyFrom(allocator, spec.shape, spec.dtype)
                                                               : Tensor::Empty(spec.shape, spec.dtype, device));
  }
  return batch;
}

Batch LoadBatch(const BatchSource& source, const std::vector<int64_t>& indices, Device device, int64_t epoch) {
  const int64_t count = static_cast<int64_t>(indices.size());
  Batch host = AllocateBatch(source, count, Device::Cpu());
  source.Fill(indices.data(), count, epoch, host);
  if (device.is_cpu()) return host;
  Batch on_device = host;
  for (auto& [name, t] : on_device.tensors) t = t.To(device);
  return on_device;
}

void CopyBatch(ExecutionContext& ctx, const Batch& from, Batch& to) {
  CHECK_EQ(from.tensors.size(), to.tensors.size()) << "copying a batch into one of other tensors";
  for (auto& [name, t] : to.tensors) Copy(ctx, from.Get(name), t);
  to.step = from.step;
  to.first_sample = from.first_sample;
  to.real_tokens = from.real_tokens;
  to.replaced_samples = from.replaced_samples;
}

namespace {

class ImageSource : public BatchSource {
 public:
  ImageSource(std::unique_ptr<ImageDataset> data, std::string spec) : data_(std::move(data)), spec_(std::move(spec)) {}

  int64_t size() const override { return data_->size(); }
  std::vector<TensorSpec> Specs(int64_t count) const override {
    const int64_t s = data_->image_size();
    return {{"images", {count, data_->channels(), s, s}, DType::kF32}, {"labels", {count}, DType::kI64}};
  }
  void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const override {
    Tensor images = batch.Get("images"), labels = batch.Get("labels");
    batch.replaced_samples = data_->Fill(indices, count, epoch, images, labels);
    batch.real_tokens = 0;
  }
  bool ReadsFiles() const override { return data_->ReadsFiles(); }
  bool GeneratesOnDevice() const override { return data_->GeneratesOnDevice(); }
  void FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Batch& batch) const override {
    Tensor images = batch.Get("images"), labels = batch.Get("labels");
    data_->FillRangeOnDevice(ctx, first, images, labels);
  }
  const char* sample_noun() const override { return "images"; }
  std::string Describe() const override {
    const std::string s = std::to_string(data_->image_size());
    return s + "x" + s + " images from " + spec_;
  }

 private:
  std::unique_ptr<ImageDataset> data_;
  std::string spec_;
};

const Tensor& TokenTensor(const TokenBatch& b, const std::string& name) {
  if (name == "labels") return b.labels;
  if (name == "next_sentence_label") return b.next_sentence_label;
  if (name == "start_positions") return b.start_positions;
  if (name == "end_positions") return b.end_positions;
  CHECK_EQ(name, "offset_mapping");
  return b.offset_mapping;
}

class TokenSource : public BatchSource {
 public:
  TokenSource(std::unique_ptr<TokenDataset> data, std::string spec) : data_(std::move(data)), spec_(std::move(spec)) {}

  int64_t size() const override { return data_->size(); }
  std::vector<TensorSpec> Specs(int64_t count) const override {
    const Shape tokens = {count, data_->seq_len()};
    std::vector<TensorSpec> specs = {{"input_ids", tokens, DType::kI64},
                                     {"token_type_ids", tokens, DType::kI64},
                                     {"attention_mask", tokens, DType::kI64}};
    switch (data_->task()) {
      case TokenTask::kQuestionAnswering:
        specs.push_back({"start_positions", {count}, DType::kI64});
        specs.push_back({"end_positions", {count}, DType::kI64});
        if (data_->offset_mapping().defined()) {
          specs.push_back({"offset_mapping", {count, data_->seq_len(), 2}, DType::kI64});
        }
        break;
      case TokenTask::kClassification:
        specs.push_back({"labels", {count}, DType::kI64});
        break;
      case TokenTask::kPretraining:
        specs.push_back({"labels", tokens, DType::kI64});
        specs.push_back({"next_sentence_label", {count}, DType::kI64});
        specs.push_back({"mlm_positions", {count * data_->max_predictions()}, DType::kI64});
        specs.push_back({"mlm_labels", {count * data_->max_predictions()}, DType::kI64});
        break;
    }
    return specs;
  }
  void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const override {
    const TokenBatch filled = data_->Fill(indices, count, epoch);
    auto put = [&](const char* name, const Tensor& from) {
      Tensor to = batch.Get(name);
      CHECK(to.shape() == from.shape()) << "batch tensor '" << name << "' is " << to.DebugString() << ", the data's "
                                        << from.DebugString();
      std::memcpy(to.raw_data(), from.raw_data(), from.nbytes());
    };
    put("input_ids", filled.input_ids);
    put("token_type_ids", filled.token_type_ids);
    put("attention_mask", filled.attention_mask);
    for (const char* name : {"labels", "next_sentence_label", "start_positions", "end_positions", "offset_mapping"}) {
      if (batch.Find(name) != nullptr) put(name, TokenTensor(filled, name));
    }
    if (batch.Find("mlm_positions") != nullptr) {  // the tensors share the batch's storage
      Tensor rows = batch.Get("mlm_positions"), targets = batch.Get("mlm_labels");
      FindMlmPositions(filled.labels.data<int64_t>(), count, data_->seq_len(), data_->max_predictions(),
                       rows.data<int64_t>(), targets.data<int64_t>());
    }
    int64_t real = 0;
    const int64_t* mask = filled.attention_mask.data<int64_t>();
    for (int64_t i = 0; i < filled.attention_mask.numel(); ++i) real += mask[i];
    batch.real_tokens = real;
  }
  bool ReadsFiles() const override { return data_->ReadsFiles(); }
  const char* sample_noun() const override { return "sequences"; }
  int64_t tokens_per_sample() const override { return data_->seq_len(); }
  std::string Describe() const override {
    return "sequences of " + std::to_string(data_->seq_len()) + " tokens from " + spec_;
  }

 private:
  std::unique_ptr<TokenDataset> data_;
  std::string spec_;
};

}  // namespace

std::unique_ptr<BatchSource> ImageBatches(std::unique_ptr<ImageDataset> data, const std::string& spec) {
  return std::make_unique<ImageSource>(std::move(data), spec);
}

std::unique_ptr<BatchSource> TokenBatches(std::unique_ptr<TokenDataset> data, const std::string& spec) {
  return std::make_unique<TokenSource>(std::move(data), spec);
}

}  // namespace ddp
