#include "launch/training_data.h"

#include "models/bert.h"
#include "models/registry.h"
#include "runtime/data/image_folder.h"

namespace ddp {
namespace {

// Spatial size after ResNet's five halvings (stem conv, max pool, three
// strided stages), each rounding up.
int64_t ResNetFinalSize(int64_t image) {
  for (int i = 0; i < 5; ++i) image = (image + 1) / 2;
  return image;
}

StatusOr<TrainingData> OpenImageData(const TrainOptions& options) {
  ImageDataOptions data_options;
  data_options.image_size = options.image_size;
  data_options.num_classes = options.num_classes;
  data_options.seed = options.seed;
  data_options.crop_scale_min = options.crop_scale_min;
  data_options.crop_scale_max = options.crop_scale_max;
  data_options.hflip = options.hflip;
  data_options.loader_threads = options.loader_threads;
  ASSIGN_OR_RETURN(std::unique_ptr<ImageDataset> train, OpenImageDataset("--data", options.data, data_options));
  const int64_t image = train->image_size();
  // The same floor as --image-size's: smaller images leave ResNet's last
  // stages a pixel or less.
  if (image < 32) {
    return InvalidArgument("--data " + options.data + ": images are " + std::to_string(image) +
                           " pixels square; ResNet needs at least 32, as --image-size does");
  }
  std::unique_ptr<ImageDataset> eval;
  if (!options.eval_data.empty()) {
    // Held-out data: the evaluation transform, the training data's classes.
    data_options.train = false;
    if (const auto* folder = dynamic_cast<const ImageFolderDataset*>(train.get())) {
      data_options.expected_classes = folder->classes();
    }
    ASSIGN_OR_RETURN(eval, OpenImageDataset("--eval-data", options.eval_data, data_options));
    if (eval->size() == ImageDataset::kEndless) {
      return InvalidArgument("--eval-data must be a tensors:FILE dataset, not '" + options.eval_data + "'");
    }
    if (eval->image_size() != image) {
      return InvalidArgument("--eval-data images are " + std::to_string(eval->image_size()) +
                             " pixels square, the training data's " + std::to_string(image));
    }
  }
  // Files that do not decode are refused now, not at the first batch or,
  // held out, after training.
  RETURN_IF_ERROR(train->Probe());
  if (eval) RETURN_IF_ERROR(eval->Probe());
  const int64_t last = ResNetFinalSize(image);
  if (options.batch_size * last * last < 2) {
    return InvalidArgument("--batch-size " + std::to_string(options.batch_size) + " with " + std::to_string(image) +
                           "-pixel images leaves one value per channel in the last batch norm; use a larger batch");
  }
  TrainingData data;
  data.train = ImageBatches(std::move(train), options.data);
  if (eval) data.eval = ImageBatches(std::move(eval), options.eval_data);
  return data;
}

StatusOr<TrainingData> OpenTokenData(const TrainOptions& options) {
  ASSIGN_OR_RETURN(const BertConfig config, BertConfigFor(options.model));
  TokenDataOptions data_options;
  data_options.seq_len = options.seq_len;
  data_options.vocab_size = config.vocab_size;
  data_options.max_positions = config.max_positions;
  data_options.type_vocab = config.type_vocab;
  data_options.model = options.model;
  data_options.seed = options.seed;
  if (options.task == "classification") data_options.classes = options.num_classes;
  TrainingData data;
  ASSIGN_OR_RETURN(std::unique_ptr<TokenDataset> train, OpenTokenDataset("--data", options.data, data_options));
  data.train = TokenBatches(std::move(train), options.data);
  if (!options.eval_data.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<TokenDataset> eval,
                     OpenTokenDataset("--eval-data", options.eval_data, data_options));
    if (eval->size() == TokenDataset::kEndless) {
      return InvalidArgument("--eval-data must be a tensors:FILE dataset, not '" + options.eval_data + "'");
    }
    data.eval = TokenBatches(std::move(eval), options.eval_data);
  }
  return data;
}

}  // namespace

StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options) {
  switch (InputOf(options.model)) {
    case ModelInput::kTokens:
      return OpenTokenData(options);
    case ModelInput::kImages:
      break;
  }
  return OpenImageData(options);
}

}  // namespace ddp
