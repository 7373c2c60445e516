// --load-weights and --save-weights: a model's parameters and buffers as
// safetensors, under PyTorch's names (torchvision's, Hugging Face's), so
// `load_state_dict(strict=True)` takes what is saved and PyTorch's files
// load here.
#pragma once

#include <string>

#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

// Reads `path` into `model` (on the host, before it moves to its device).
// NaN or Inf is refused at load, naming the tensor, not found later as a
// non-finite gradient blamed on the data. Fine-tuning from another head:
// `announce` prints one line each for the tensors left out and those that
// start fresh. Errors start "--load-weights PATH".
Status LoadWeightsFile(const std::string& path, Model& model, const std::string& model_name, bool announce);

// Writes the model's state (f32 master weights, buffers) to `path`
// atomically; a model holding non-finite values is refused, naming the
// tensor, rather than saved. Errors start "--save-weights PATH".
Status SaveWeightsFile(const std::string& path, Model& model, ExecutionContext& ctx, const std::string& model_name);

}  // namespace ddp
