// Models by name, as --model spells them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

struct ModelOptions {
  std::string name;  // resnet18 resnet34 resnet50 resnet101 resnet152 bert-tiny bert-base bert-large
  int64_t num_classes = 1000;
  bool zero_init_residual = false;
  float dropout = 0.1f;  // BERT's hidden and attention dropout
  std::string task = "pretraining";  // BERT: or "classification" (num_classes), "question-answering"
  bool activation_checkpointing = false;  // BERT's encoder layers, ResNet's stages
  double label_smoothing = 0.0;  // image classifiers' cross-entropy
  uint64_t seed = 1;
  // Where the parameters are made: the host (initialized from `seed`), or
  // the meta device (shapes only: a memory plan).
  Device device = Device::Cpu();
};

// Every name CreateModel accepts.
std::vector<std::string> ModelNames();
// Ok when CreateModel knows `name`; else the InvalidArgument it gives,
// listing the known ones.
Status CheckModelName(const std::string& name);
// An unknown name is an InvalidArgument listing the known ones. The model
// comes with its loss (Model::ForwardLoss works).
StatusOr<std::unique_ptr<Model>> CreateModel(const ModelOptions& options);

// What a model reads: images and labels, or BERT's token tensors.
enum class ModelInput { kImages, kTokens };
ModelInput InputOf(const std::string& model);

// --lr's default for `model` at a global batch of `global_batch` samples:
// Goyal et al.'s linear scaling rule for image classifiers (0.1 at 256);
// 1e-4 for BERT, as its AdamW and LAMB recipes start.
double DefaultLearningRate(const std::string& model, int64_t global_batch);

}  // namespace ddp
