// Held-out evaluation (--eval-data, --eval-every, and at the end): rank r
// evaluates samples r, r + world, ..., in batches of --batch-size, and the
// model's first count (top-1 of images, masked tokens in pretraining,
// sequences in classification) is summed over ranks. Every rank evaluates
// rank 0's model: each rank's batch-norm running statistics have seen only
// its own samples, so rank 0's are broadcast first (as DDP's
// broadcast_buffers does before a forward); --save-weights and checkpoints
// hold rank 0's too.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "runtime/data/batch_source.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

struct EvaluatorOptions {
  int64_t batch_size = 1;
  int rank = 0, world_size = 1;
  // DDP_TEST_STATE_DIGEST: each rank prints a hash of the buffers and
  // parameters it evaluates with.
  bool print_digest = false;
};

struct Evaluation {
  double accuracy = 0.0;  // correct / counted, every rank's
  std::string label;      // the count's name for people ("accuracy", "MLM accuracy")
  // The model's per-sample results over the whole set, rows in sample
  // order, on every rank (question answering: each feature's best span);
  // undefined when the model has none.
  Tensor sample_outputs;
};

// Collective over `comm` (null: one rank). `data` is the held-out set;
// `optimizer_steps` labels the digest. The model is back in training mode
// afterwards.
StatusOr<Evaluation> Evaluate(ExecutionContext& ctx, Model& model, const BatchSource& data, Communicator* comm,
                              const EvaluatorOptions& options, int64_t optimizer_steps);

}  // namespace ddp
