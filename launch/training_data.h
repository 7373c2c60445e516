// The data a run trains and evaluates on, as the model reads it: images for
// image classifiers, BERT's token tensors for BERT (models/registry's
// InputOf). The one place that pairs a model family with its datasets; the
// trainer sees batches of named tensors only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launch/train_options.h"
#include "runtime/data/batch_source.h"
#include "runtime/data/squad.h"
#include "runtime/status.h"

namespace ddp {

struct TrainingData {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> eval;  // null without --eval-data
  // --squad-eval-file: its questions, and the evaluation features' links
  // to them (null without it).
  struct Squad {
    SquadSet set;
    Tensor example_index, offset_mapping;
  };
  std::shared_ptr<const Squad> squad;
  // Lines for rank 0 to print ("ddp_train: warning: " before each).
  std::vector<std::string> warnings;
};

// Opens --data and --eval-data; every problem with them (a bad file, a
// mismatched evaluation set, a batch too small for the model) is one line
// naming the flag.
StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options);

}  // namespace ddp
