#include "runtime/data/image_dataset.h"

#include <cmath>

#include <cstring>

#include "runtime/data/data_spec.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/synthetic_images.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

// A whole labelled set held in memory, from a safetensors file.
class TensorsDataset : public ImageDataset {
 public:
  TensorsDataset(Tensor images, Tensor labels, int64_t num_classes)
      : images_(std::move(images)), labels_(std::move(labels)), num_classes_(num_classes) {}

  int64_t size() const override { return images_.dim(0); }
  int64_t channels() const override { return images_.dim(1); }
  int64_t image_size() const override { return images_.dim(2); }
  int64_t num_classes() const override { return num_classes_; }

  int64_t Fill(const int64_t* indices, int64_t count, int64_t, Tensor& images, Tensor& labels) const override {
    const int64_t sample = images_.numel() / images_.dim(0);
    CHECK_EQ(images.numel(), count * sample) << "dataset batch " << images.DebugString();
    for (int64_t b = 0; b < count; ++b) {
      CHECK(indices[b] >= 0 && indices[b] < size()) << "sample " << indices[b] << " of " << size();
      std::memcpy(images.data<float>() + b * sample, images_.data<float>() + indices[b] * sample,
                  sample * sizeof(float));
      labels.data<int64_t>()[b] = labels_.data<int64_t>()[indices[b]];
    }
    return 0;
  }

 private:
  Tensor images_, labels_;
  int64_t num_classes_;
};

StatusOr<std::unique_ptr<ImageDataset>> OpenTensors(const std::string& path, const ImageDataOptions& options) {
  ASSIGN_OR_RETURN(SafetensorsContents contents, ReadSafetensors(path));
  const Tensor* images = contents.Find("images");
  const Tensor* labels = contents.Find("labels");
  if (images == nullptr) return InvalidArgument(path + ": no tensor 'images' (f32 [N, 3, H, W])");
  if (labels == nullptr) return InvalidArgument(path + ": no tensor 'labels' (i64 [N])");
  if (images->dtype() != DType::kF32 || images->ndim() != 4 || images->dim(1) != 3 || images->dim(2) != images->dim(3) ||
      images->dim(0) == 0) {
    return InvalidArgument(path + ": tensor 'images' must be f32 [N, 3, H, H] with N > 0, got " +
                           DTypeName(images->dtype()) + ShapeToString(images->shape()));
  }
  if (labels->dtype() != DType::kI64 || labels->shape() != Shape{images->dim(0)}) {
    return InvalidArgument(path + ": tensor 'labels' must be i64 [" + std::to_string(images->dim(0)) + "], got " +
                           DTypeName(labels->dtype()) + ShapeToString(labels->shape()));
  }
  // A NaN or Inf pixel would train on silently (the weights it poisons are
  // found only later): refused here, naming the sample.
  const int64_t per_sample = images->numel() / images->dim(0);
  const float* pixels = images->data<float>();
  for (int64_t i = 0; i < images->numel(); ++i) {
    if (std::isfinite(pixels[i])) continue;
    return InvalidArgument(path + ": tensor 'images' sample " + std::to_string(i / per_sample) + " holds " +
                           (std::isnan(pixels[i]) ? "NaN" : "an infinite value") + " (element " +
                           std::to_string(i % per_sample) + ")");
  }
  for (int64_t i = 0; i < labels->numel(); ++i) {
    const int64_t label = labels->data<int64_t>()[i];
    if (label < 0 || label >= options.num_classes) {
      return InvalidArgument(path + ": tensor 'labels' element " + std::to_string(i) + " is " +
                             std::to_string(label) + ", outside [0, " + std::to_string(options.num_classes) +
                             ") for --num-classes " + std::to_string(options.num_classes));
    }
  }
  return std::unique_ptr<ImageDataset>(std::make_unique<TensorsDataset>(*images, *labels, options.num_classes));
}

}  // namespace

StatusOr<std::unique_ptr<ImageDataset>> OpenImageDataset(const std::string& flag, const std::string& spec,
                                                         const ImageDataOptions& options) {
  if (spec == "synthetic") {
    SyntheticImagesConfig config;
    config.image_size = options.image_size;
    config.num_classes = options.num_classes;
    config.seed = options.seed;
    return std::unique_ptr<ImageDataset>(std::make_unique<SyntheticImages>(config));
  }
  if (const std::string file = SpecPath(spec, "tensors:"); !file.empty()) {
    StatusOr<std::unique_ptr<ImageDataset>> opened = OpenTensors(file, options);
    if (!opened.ok()) return Status(opened.status().code(), flag + " " + opened.status().message());
    return opened;
  }
  if (const std::string dir = SpecPath(spec, "imagefolder:"); !dir.empty()) {
    ImageFolderOptions o;
    o.image_size = options.image_size;
    o.train = options.train;
    o.augment.scale_min = options.crop_scale_min;
    o.augment.scale_max = options.crop_scale_max;
    o.augment.hflip = options.hflip;
    o.seed = options.seed;
    o.loader_threads = options.loader_threads;
    o.expected_classes = options.expected_classes;
    ASSIGN_OR_RETURN(std::unique_ptr<ImageFolderDataset> data, OpenImageFolder(flag, dir, o));
    if (data->num_classes() != options.num_classes) {
      return InvalidArgument(flag + " " + spec + " has " + std::to_string(data->num_classes()) +
                             " class folders, --num-classes is " + std::to_string(options.num_classes) +
                             ": give --num-classes " + std::to_string(data->num_classes()));
    }
    return std::unique_ptr<ImageDataset>(std::move(data));
  }
  if (spec.rfind("tokens:", 0) == 0) {
    return InvalidArgument(flag + " '" + spec + "': tokens:PATH is for BERT models, not image models");
  }
  return InvalidArgument(flag + " '" + spec + "' is not synthetic, tensors:FILE or imagefolder:DIR");
}

}  // namespace ddp
