// The training loop that ties data, model, loss and optimizer together on
// one rank: micro-batches with gradient accumulation, clipping, the LR
// schedule, evaluation, weights in and out, progress and metrics.
#pragma once

#include <memory>

#include "launch/train_options.h"
#include "models/registry.h"
#include "runtime/data/image_dataset.h"
#include "runtime/data/sampler.h"
#include "runtime/execution_context.h"
#include "runtime/metrics.h"
#include "runtime/optim/optimizer.h"

namespace ddp {

struct TrainResult {
  double final_loss = 0.0;
  double samples_per_s = 0.0;
  double eval_accuracy = -1.0;  // -1 without --eval-data
};

class Trainer {
 public:
  // Opens data and files, builds the model and optimizer. Every user error
  // (bad file, mismatched weights, unwritable metrics) is returned here,
  // before any training.
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainOptions& options);

  StatusOr<TrainResult> Run();

 private:
  explicit Trainer(const TrainOptions& options);
  Status Setup();
  // Mean loss of the global step.
  StatusOr<double> TrainStep(int64_t step, float lr);
  double Evaluate();

  TrainOptions options_;
  ExecutionContext ctx_;
  std::unique_ptr<ImageDataset> train_data_, eval_data_;
  std::unique_ptr<GlobalBatchSampler> sampler_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Tensor> grads_;
  MetricsWriter metrics_;
  int64_t total_steps_ = 0;
  Tensor images_, labels_, probs_, dlogits_;
};

}  // namespace ddp
