#include "models/registry.h"

#include "models/bert.h"
#include "models/resnet.h"

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
    return std::make_unique<Model>(options.name, BuildResNet(config), options.seed);
  }
  if (options.name.rfind("bert-", 0) == 0) {
    StatusOr<BertConfig> config = BertConfigFor(options.name);
    if (config.ok()) {
      config->dropout = options.dropout;
      config->seed = options.seed;
      config->activation_checkpointing = options.activation_checkpointing;
      if (options.task == "classification") {
        return std::make_unique<Model>(options.name, BuildBertForSequenceClassification(*config, options.num_classes),
                                       options.seed);
      }
      return std::make_unique<Model>(options.name, BuildBertForPreTraining(*config), options.seed);
    }
  }
  std::string known;
  for (const std::string& n : ModelNames()) known += (known.empty() ? "" : " ") + n;
  return InvalidArgument("--model '" + options.name + "' is unknown; known models: " + known);
}

}  // namespace ddp
