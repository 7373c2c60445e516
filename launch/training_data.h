// The data a run trains and evaluates on, as the model reads it: images for
// image classifiers, BERT's token tensors for BERT (models/registry's
// InputOf). The one place that pairs a model family with its datasets; the
// trainer sees batches of named tensors only.
#pragma once

#include <memory>

#include "launch/train_options.h"
#include "runtime/data/batch_source.h"
#include "runtime/status.h"

namespace ddp {

struct TrainingData {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> eval;  // null without --eval-data
};

// Opens --data and --eval-data; every problem with them (a bad file, a
// mismatched evaluation set, a batch too small for the model) is one line
// naming the flag.
StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options);

}  // namespace ddp
