// Models by name, as --model spells them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

struct ModelOptions {
  std::string name;  // resnet18 resnet34 resnet50 resnet101 resnet152 bert-tiny bert-base bert-large
  int64_t num_classes = 1000;
  bool zero_init_residual = false;
  float dropout = 0.1f;  // BERT's hidden and attention dropout
  std::string task = "pretraining";  // BERT: or "classification" (num_classes)
  bool activation_checkpointing = false;  // BERT's encoder layers, ResNet's stages
  uint64_t seed = 1;
};

// Every name CreateModel accepts.
std::vector<std::string> ModelNames();
// An unknown name is an InvalidArgument listing the known ones.
StatusOr<std::unique_ptr<Model>> CreateModel(const ModelOptions& options);

}  // namespace ddp
