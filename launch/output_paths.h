// What a run reads and what it writes, for the check before training (rank
// 0, runtime/path_use.h): no output lands on an input (the dataset, each
// token shard of a list, the weights, the config), inside an image folder,
// or on another output.
#pragma once

#include <string>
#include <vector>

#include "launch/train_options.h"
#include "runtime/path_use.h"
#include "runtime/status.h"

namespace ddp {

// The files and directories `options` reads: --data and --eval-data's
// files (tensors:, imagefolder:, tokens:), --load-weights, --config, and a
// resumed --checkpoint-dir.
std::vector<PathUse> InputPaths(const TrainOptions& options);
// The files and directories rank 0 writes.
std::vector<PathUse> OutputPaths(const TrainOptions& options);

}  // namespace ddp
