#include "launch/training_data.h"

#include "models/bert.h"
#include "models/registry.h"
#include "runtime/data/data_spec.h"
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
  data_options.question_answering = options.task == "question-answering";
  if (options.seq_len_given) data_options.expect_seq_len = options.seq_len;
  TrainingData data;
  ASSIGN_OR_RETURN(std::unique_ptr<TokenDataset> train, OpenTokenDataset("--data", options.data, data_options));
  auto clamped = [&](const std::string& flag, const TokenDataset& set) {
    if (set.clamped_positions() == 0) return;
    data.warnings.push_back(flag + " " + (flag == "--data" ? options.data : options.eval_data) +
                            ": " + std::to_string(set.clamped_positions()) +
                            " start or end positions lie past the sequence; they are clamped to it and ignored, "
                            "as Hugging Face's question answering loss does");
  };
  clamped("--data", *train);
  data.train = TokenBatches(std::move(train), options.data);
  Tensor examples, offsets;  // question answering evaluation features' links to their questions
  std::map<std::string, std::string> eval_metadata;  // and the SQuAD file they came from
  if (!options.eval_data.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<TokenDataset> eval,
                     OpenTokenDataset("--eval-data", options.eval_data, data_options));
    if (eval->size() == TokenDataset::kEndless) {
      return InvalidArgument("--eval-data must be a tensors:FILE dataset, not '" + options.eval_data + "'");
    }
    clamped("--eval-data", *eval);
    examples = eval->example_index();
    offsets = eval->offset_mapping();
    eval_metadata = eval->metadata();
    data.eval = TokenBatches(std::move(eval), options.eval_data);
  }
  if (!options.squad_eval_file.empty()) {
    // Read now: a bad file fails before training, not after it.
    auto squad = std::make_shared<TrainingData::Squad>();
    StatusOr<SquadSet> set = ReadSquad(options.squad_eval_file);
    if (!set.ok()) return Status(set.status().code(), "--squad-eval-file " + set.status().message());
    squad->set = std::move(*set);
    const std::string features = SpecPath(options.eval_data, "tensors:");
    if (!examples.defined() || !offsets.defined()) {
      return InvalidArgument("--eval-data " + features + ": no example_index and offset_mapping, which "
                             "--squad-eval-file needs (tools/make_squad_tensors --eval writes them)");
    }
    squad->example_index = examples;
    squad->offset_mapping = offsets;
    RETURN_IF_ERROR(CheckFeaturesSource(squad->set, eval_metadata, "--eval-data " + features,
                                        "--squad-eval-file " + options.squad_eval_file));
    RETURN_IF_ERROR(CheckFeatures(squad->set, examples, offsets,
                                  "--eval-data " + features + " (against --squad-eval-file " +
                                      options.squad_eval_file + ")"));
    data.squad = std::move(squad);
  }
  if (!options.predictions_file.empty() && !offsets.defined()) {
    return InvalidArgument("--predictions-file needs --eval-data question answering features with offset_mapping "
                           "(tools/make_squad_tensors --eval writes them)" +
                           std::string(options.eval_data.empty() ? "; no --eval-data was given" : ""));
  }
  return data;
}

}  // namespace

StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options) {
  if (options.task != "pretraining" && InputOf(options.model) == ModelInput::kImages) {
    return InvalidArgument("--task " + options.task + " is BERT's; --model " + options.model +
                           " is an image classifier (leave --task out)");
  }
  if (!options.predictions_file.empty() && options.task != "question-answering") {
    return InvalidArgument("--predictions-file writes answer spans: it needs --task question-answering and "
                           "--eval-data features from tools/make_squad_tensors");
  }
  switch (InputOf(options.model)) {
    case ModelInput::kTokens:
      return OpenTokenData(options);
    case ModelInput::kImages:
      break;
  }
  return OpenImageData(options);
}

}  // namespace ddp
