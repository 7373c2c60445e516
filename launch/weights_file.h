// --load-weights and --save-weights: a model's parameters and buffers as
// safetensors, under PyTorch's names (torchvision's, Hugging Face's), so
// `load_state_dict(strict=True)` takes what is saved and PyTorch's files
// load here.
#pragma once

#include <cstdint>
#include <functional>
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

// The same file where the f32 master weights are never whole on one rank
// (ZeRO holds them in shards): `pieces` hands each range of the flat
// parameter space, as `visit(offset, values)` (f32, on the model's
// device), covering every parameter once, and each is written as it comes
// (a tied weight under both its names), so the file is never whole in
// memory either. A collective where `pieces` is: every rank calls it,
// checks every value alike, and only `writes` writes. The buffers come
// from the model.
using FlatPieceVisitor = std::function<Status(int64_t offset, const Tensor& values)>;
Status SaveWeightsFileInPieces(const std::string& path, Model& model, ExecutionContext& ctx,
                               const std::string& model_name, bool writes,
                               const std::function<Status(const FlatPieceVisitor&)>& pieces);

}  // namespace ddp
