// --cuda-graphs: a step's micro-batches (forward, loss, backward and, with
// a reducer, the gradient all-reduces and their wait) captured once as a
// CUDA graph and replayed each step. Captured after kWarmupSteps eager
// steps (algorithm search, the bucket-order check, lazily sized buffers),
// and again whenever the loss scale changes (the loss gradient's scale is
// a kernel argument). Inputs go into the graph's own buffers before each
// replay; the losses stay on the device until read after it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "runtime/batch.h"
#include "runtime/data/batch_source.h"
#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

struct StepGraphOptions {
  int64_t accumulation_steps = 1;
  int world_size = 1;  // the loss gradient's divisor, with the micro-batches
};

class StepGraph {
 public:
  static constexpr int64_t kWarmupSteps = 2;

  // Refuses what cannot be graphed (no stream-ordered memory pool, a loss
  // read on the host) naming the flag; allocates one input batch of
  // `batch_size` a micro-batch. `ctx` (the rank's, on its current stream),
  // `model` and `reducer` (null: one rank) outlive the graph; `comm` (null:
  // one rank) agrees on each capture.
  static StatusOr<std::unique_ptr<StepGraph>> Create(StepGraphOptions options, ExecutionContext& ctx, Model* model,
                                                     Reducer* reducer, Communicator* comm, const BatchSource& data,
                                                     int64_t batch_size, const std::string& model_name,
                                                     const std::string& device);
  ~StepGraph();

  // Micro-batch `micro`'s input buffers: fill them before Replay.
  Batch& input(int64_t micro) { return inputs_[micro]; }
  // Replays the step (capturing it first where there is no graph yet or
  // `loss_scale` changed, on every rank together); the mean loss.
  StatusOr<double> Replay(double loss_scale);
  int64_t captures() const { return captures_; }

 private:
  StepGraph(StepGraphOptions options, ExecutionContext& ctx, Model* model, Reducer* reducer, Communicator* comm);
  Status Capture(double loss_scale);
  void Destroy();

  StepGraphOptions options_;
  ExecutionContext& ctx_;
  Model* model_;
  Reducer* reducer_;
  Communicator* comm_;
  void* graph_ = nullptr;
  // The graph's ops' context: the scratch its kernels use stays referenced
  // for as long as the graph lives, whatever eager work (evaluation of a
  // smaller last batch, say) later makes ctx_ replace.
  std::optional<ExecutionContext> graph_ctx_;
  double scale_ = 0.0;  // the loss scale captured at
  int64_t captures_ = 0;
  std::vector<Batch> inputs_;
  Tensor losses_;  // f64 [K, S]: each micro-batch's loss figures (Model::ForwardLossToDevice)
};

}  // namespace ddp
