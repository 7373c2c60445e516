// Image classification data: where training and evaluation samples come
// from. `synthetic` generates learnable images; `tensors:FILE` holds a whole
// set in one safetensors file (images f32 [N, C, H, W], labels i64 [N]);
// `imagefolder:DIR` decodes JPEG and PNG files (image_folder.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/execution_context.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  // Number of samples; kEndless for a generated set.
  static constexpr int64_t kEndless = -1;
  virtual int64_t size() const = 0;
  virtual int64_t channels() const = 0;
  virtual int64_t image_size() const = 0;  // height = width
  virtual int64_t num_classes() const = 0;
  // Writes samples indices[0..count) into images [count, C, H, W] and labels
  // [count]; `epoch` keys random augmentation. Returns how many samples
  // were replaced because their file would not decode.
  virtual int64_t Fill(const int64_t* indices, int64_t count, int64_t epoch, Tensor& images,
                       Tensor& labels) const = 0;
  // Whether filling decodes files: worth doing ahead, on loader threads.
  virtual bool ReadsFiles() const { return false; }
  // Reads a few samples as Fill would, at start-up: data that cannot be
  // read is refused before any training, with the line Fill would end on.
  virtual Status Probe() const { return Status::Ok(); }
  // Whether a GPU makes the samples, with FillRangeOnDevice: a generated
  // set can make them where training runs, with no host work or copy. (In
  // a CPU-only build no GPU is ever asked; memory plans for one count the
  // input as a CUDA build holds it.)
  virtual bool GeneratesOnDevice() const { return false; }
  // Samples first, first + 1, ... into device tensors, on ctx's stream.
  virtual void FillRangeOnDevice(ExecutionContext& ctx, int64_t first, Tensor& images, Tensor& labels) const {
    (void)ctx, (void)first, (void)images, (void)labels;
    LOG(FATAL) << "this dataset is read on the host";
  }
};

struct ImageDataOptions {
  int64_t image_size = 224;  // synthetic and imagefolder; a tensors file has its own
  int64_t num_classes = 1000;
  uint64_t seed = 1;
  // imagefolder: training augmentation (else the evaluation transform),
  // loader threads, and the classes a held-out folder must have.
  bool train = true;
  double crop_scale_min = 0.08, crop_scale_max = 1.0;
  bool hflip = true;
  int loader_threads = 1;
  std::vector<std::string> expected_classes;
};

// `spec` is "synthetic", "tensors:FILE" or "imagefolder:DIR". Errors name the flag value, the
// file and the tensor at fault. `flag` ("--data", "--eval-data") prefixes
// messages about the spec itself.
StatusOr<std::unique_ptr<ImageDataset>> OpenImageDataset(const std::string& flag, const std::string& spec,
                                                         const ImageDataOptions& options);

}  // namespace ddp
