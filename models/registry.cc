#include "models/registry.h"

#include <algorithm>

#include "models/bert.h"
#include "models/bert_question_answering.h"
#include "models/resnet.h"
#include "runtime/layers/classification_loss.h"

namespace ddp {
namespace {

struct Entry {
  const char* name;
  int resnet_depth;
};

constexpr Entry kModels[] = {
    {"resnet18", 18}, {"resnet34", 34}, {"resnet50", 50}, {"resnet101", 101}, {"resnet152", 152},
};

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Entry& e : kModels) names.push_back(e.name);
  for (const char* bert : {"bert-tiny", "bert-base", "bert-large"}) names.push_back(bert);
  return names;
}

namespace {

Status UnknownModel(const std::string& name) {
  std::string known;
  for (const std::string& n : ModelNames()) known += (known.empty() ? "" : " ") + n;
  return InvalidArgument("--model '" + name + "' is unknown; known models: " + known);
}

}  // namespace

StatusOr<std::unique_ptr<Model>> CreateModel(const ModelOptions& options) {
  if (options.num_classes < 1) {
    return InvalidArgument("--num-classes must be positive, got " + std::to_string(options.num_classes));
  }
  for (const Entry& e : kModels) {
    if (options.name != e.name) continue;
    ResNetConfig config;
    config.depth = e.resnet_depth;
    config.num_classes = options.num_classes;
    config.zero_init_residual = options.zero_init_residual;
    config.checkpoint_stages = options.activation_checkpointing;
    auto model = std::make_unique<Model>(options.name, BuildResNet(config), options.seed, options.device);
    model->set_output_loss(std::make_unique<SoftmaxClassificationLoss>(options.label_smoothing));
    return model;
  }
  if (InputOf(options.name) == ModelInput::kTokens) {
    StatusOr<BertConfig> config = BertConfigFor(options.name);
    if (config.ok()) {
      config->dropout = options.dropout;
      config->seed = options.seed;
      config->activation_checkpointing = options.activation_checkpointing;
      if (options.task == "question-answering") {
        return std::make_unique<Model>(options.name, BuildBertForQuestionAnswering(*config), options.seed,
                                       options.device);
      }
      if (options.task == "classification") {
        return std::make_unique<Model>(options.name, BuildBertForSequenceClassification(*config, options.num_classes),
                                       options.seed, options.device);
      }
      return std::make_unique<Model>(options.name, BuildBertForPreTraining(*config), options.seed, options.device);
    }
  }
  return UnknownModel(options.name);
}

Status CheckModelName(const std::string& name) {
  const std::vector<std::string> names = ModelNames();
  return std::find(names.begin(), names.end(), name) != names.end() ? Status::Ok() : UnknownModel(name);
}

ModelInput InputOf(const std::string& model) {
  return model.rfind("bert-", 0) == 0 ? ModelInput::kTokens : ModelInput::kImages;
}

double DefaultLearningRate(const std::string& model, int64_t global_batch) {
  if (InputOf(model) == ModelInput::kTokens) return 1e-4;
  return 0.1 * static_cast<double>(global_batch) / 256.0;
}

}  // namespace ddp
