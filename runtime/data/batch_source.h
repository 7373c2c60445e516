// Where a run's samples come from, for any model: batches of named tensors
// (DESIGN.md's names), filled on the host into tensors the caller allocates
// from Specs() (a GPU rank's pinned staging buffers, a CUDA graph's inputs),
// or generated on the device. The trainer, the stager and the evaluation
// loop see only this; which datasets stand behind it is the data opener's
// business (launch/training_data).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/image_dataset.h"
#include "runtime/data/token_dataset.h"
#include "runtime/execution_context.h"
#include "runtime/batch.h"
#include "runtime/tensor.h"

namespace ddp {

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  static constexpr int64_t kEndless = -1;
  // Number of samples; kEndless for a generated set.
  virtual int64_t size() const = 0;
  // The tensors of a batch of `count` samples.
  virtual std::vector<TensorSpec> Specs(int64_t count) const = 0;
  // Writes samples indices[0..count) of epoch `epoch` (which keys random
  // augmentation) into `batch`, whose tensors are shaped by Specs(count)
  // and on the host; sets batch.real_tokens and batch.replaced_samples.
  virtual void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const = 0;
  // Whether filling decodes files: worth doing ahead, on loader threads
  // (in-memory and generated sets fill in place).
  virtual bool ReadsFiles() const { return false; }
  // Whether a GPU makes the samples, with FillRangeOnDevice: a generated
  // set can make them where training runs, with no host work or copy. (In
  // a CPU-only build no GPU is ever asked; memory plans for one count the
  // input as a CUDA build holds it.)
  virtual bool GeneratesOnDevice() const { return false; }
  // Samples first, first + 1, ... into device tensors, on ctx's stream.
  virtual void FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Batch& batch) const;

  // For reports: what a sample is ("images", "sequences"), the tokens it
  // counts for tokens/s (0: none), and one phrase for the start-up line
  // ("224x224 images from synthetic").
  virtual const char* sample_noun() const = 0;
  virtual int64_t tokens_per_sample() const { return 0; }
  virtual std::string Describe() const = 0;
};

// Tensors of Specs(count) on `device` (Tensor::Empty), or with `allocator`
// when one is given (page-locked host memory).
Batch AllocateBatch(const BatchSource& source, int64_t count, Device device, Allocator* allocator = nullptr);
// Samples `indices` of `source` on `device`: filled on the host, then
// copied (evaluation).
Batch LoadBatch(const BatchSource& source, const std::vector<int64_t>& indices, Device device, int64_t epoch = 0);
// Copies every tensor of `from` into the one of the same name in `to`
// (shapes alike), and the batch's counters.
void CopyBatch(ExecutionContext& ctx, const Batch& from, Batch& to);

// "images" f32 [N, C, H, W], "labels" i64 [N]. `spec` names the data in
// Describe() ("synthetic", "tensors:FILE").
std::unique_ptr<BatchSource> ImageBatches(std::unique_ptr<ImageDataset> data, const std::string& spec);
// "input_ids", "token_type_ids", "attention_mask" i64 [N, T], "labels"
// (i64 [N, T] for MLM, [N] for classification), "next_sentence_label" i64
// [N] (pretraining).
std::unique_ptr<BatchSource> TokenBatches(std::unique_ptr<TokenDataset> data, const std::string& spec);

}  // namespace ddp
