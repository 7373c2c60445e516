// Building the parts a run trains with, from the options, in the order they
// depend on each other: the output-path checks, the data, the sampler and
// the run's length, the model (resumed, or --load-weights), precision,
// --bucket-mb auto, gradient synchronization, the optimizer, checkpoints,
// the metrics file, the input pipeline, the CUDA graph and GPU health.
// Every user error (a bad file, mismatched weights, an unwritable output)
// comes back here, before any training.
#pragma once

#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "comm/bootstrap.h"
#include "comm/communicator.h"
#include "launch/fault_injection.h"
#include "launch/gpu_health.h"
#include "launch/gradient_sync.h"
#include "launch/input_pipeline.h"
#include "launch/precision.h"
#include "launch/progress.h"
#include "launch/step_graph.h"
#include "launch/step_profile.h"
#include "launch/train_checkpoints.h"
#include "launch/train_options.h"
#include "launch/training_data.h"
#include "runtime/data/sampler.h"
#include "runtime/execution_context.h"
#include "runtime/metrics.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensorboard.h"

namespace ddp {

// Declared in the order they are built; destroyed in reverse, so each part
// goes before what it uses (the profiler, installed last on the model's
// gradient hook, before the gradient synchronization under it).
struct TrainComponents {
  MetricsWriter metrics;           // rank 0, --metrics-file
  TensorBoardWriter tensorboard;   // rank 0, --tensorboard-dir
  TrainingData data;
  // GPU ranks: the PCIe link and peer access reported at start, NVML
  // sampled during training (launch/gpu_health.h), for the summary.
  std::unique_ptr<HealthMonitor> health;
  nlohmann::ordered_json gpu_summary;
  std::unique_ptr<TrainCheckpoints> checkpoints;  // --checkpoint-dir
  std::unique_ptr<GlobalBatchSampler> sampler;
  int64_t total_steps = 0;
  int64_t start_step = 0;  // the first step this run trains (after --resume)
  std::unique_ptr<Precision> precision;  // the compute dtype, memory format and loss scaler
  std::unique_ptr<Model> model;
  std::unique_ptr<GradientSync> sync;       // local, DDP or ZeRO
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<StepProfiler> profiler;   // --profile-file, rank 0
  std::unique_ptr<InputPipeline> input;     // the training micro-batches
  std::unique_ptr<StepGraph> step_graph;    // --cuda-graphs
};

// Builds every part into `parts` (whose address the parts keep), completing
// `options` on the way: the loader threads, the learning rate of the linear
// scaling rule, --bucket-mb auto's choice. `comm` is null for one rank;
// `ctx` (the rank's device, stream and threads) and `progress` (rank 0's
// step lines) outlive the parts.
Status BuildComponents(TrainOptions& options, Communicator* comm, const RankInfo& ranks, ExecutionContext& ctx,
                       const FaultInjection& faults, ProgressPrinter* progress, TrainComponents* parts);

// --precision bf16 on a CPU without AVX-512 BF16 or AMX, where bf16 would
// run slower than f32: the run trains in fp32 instead, and sends f32
// gradients under --grad-compression auto. `announce` prints the one-line
// notice (rank 0).
void FallBackFromCpuBf16(TrainOptions* options, bool announce);

// The machine's cores (for --threads 0 and the loader threads).
int DefaultThreads();
// The rank's execution context: a CPU rank's threads (--threads, or the
// node's cores divided among its ranks), or a GPU rank's device and stream
// with its math mode (--precision tf32, --deterministic).
ExecutionContext MakeContext(const TrainOptions& options, const RankInfo& ranks, void* cuda_stream);

}  // namespace ddp
