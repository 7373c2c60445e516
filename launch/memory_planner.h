// The memory planner (--device meta, --plan-memory): one rank's memory in
// training, from meta steps (runtime/device.h's meta device), for any
// model, precision, checkpointing, ZeRO stage and world size, without the
// device. Each batch measured is a whole trainer built on the meta device
// (the flags as for training, the model, its gradient synchronization over
// a meta communicator of the planned world, the optimizer, the input) and
// two of its steps: every tensor a real step of the planned device
// allocates is counted, at the moment it would be, and nothing runs.
//
// With a budget the largest per-rank batch whose peak, plus the device's
// memory outside tensors (the overhead), fits is searched for
// (launch/memory_plan_search.h); with --batch-size given, that batch is
// checked too. The breakdown is in the seeds' form: parameters, the 16-bit
// copy, gradients, optimizer state, buffers, the collectives' buffers,
// input, workspace and activations, and the allocation that is the peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch/memory_plan_search.h"
#include "launch/train_options.h"
#include "runtime/allocator.h"
#include "runtime/status.h"

namespace ddp {

// One rank at one batch: the bytes each part holds at the step's peak.
struct MemoryBreakdown {
  int64_t batch_size = 0;
  int64_t parameters = 0;     // the f32 master weights
  int64_t low_precision = 0;  // their 16-bit copy (--precision bf16, fp16)
  int64_t gradients = 0;      // f32, or this rank's pieces under ZeRO-2
  int64_t optimizer = 0;      // momentum, AdamW's moments (sharded under ZeRO)
  int64_t buffers = 0;        // batch norm's running statistics
  // The gradient synchronization's own (ZeRO's shards of the master
  // weights and gather buffers, staging) and anything else held across
  // steps that no row above names.
  int64_t communication = 0;
  int64_t input = 0;          // the input batches the device holds
  int64_t workspace = 0;      // scratch slots: staging, library workspaces
  int64_t host_data = 0;      // a CPU rank's: data held in host memory (tensors: files)
  int64_t activations = 0;    // the step's peak over all of the above
  int64_t zero_bucket_pool = 0;  // of the collectives' row: ZeRO-2 and 3's gradient bucket pool
  int64_t zero_gathered_peak = 0;  // ZeRO-3: the most gathered parameter buckets held at once (in the peak's rows)
  int64_t zero_split_gradient_peak = 0;  // ZeRO-2 and 3: the largest split parameter's whole gradient (in the peak's rows)
  int64_t parameter_count = 0;  // the model's parameters (elements)
  int64_t peak = 0;           // the allocator's peak: the sum of the rows
  // The steps' own peak. Less than `peak` where start-up reached more
  // (before ZeRO shards the model): the activations row is then the steps'
  // peak over the rows above, and no longer adds up.
  int64_t step_peak = 0;
  // Start-up's peak, before the first step: the model, and where ZeRO
  // shards it, what it held before the shards (a bucket at a time where
  // the masters stay on the host).
  int64_t setup_peak = 0;
  MetaAllocator::PeakSite site;  // the allocation that reached the steps' peak
  // An activation passed the 2^31 - 1 elements a step may hold.
  bool past_activation_bound = false;
  int64_t dataset_size = 0;   // the training data's samples (BatchSource::kEndless: generated)
};

struct MemoryPlanRequest {
  TrainOptions options;  // device "meta"; every other flag as for training
  int world_size = 1;    // the ranks planned for
  int64_t overhead = 0;  // the device's memory outside tensors
  std::string overhead_source;  // how it was chosen: "--plan-overhead", "measured on GPU 0", "default"
};

struct MemoryPlan {
  MemoryPlanRequest request;
  // The breakdown at the batch reported: --batch-size when given (or
  // without a budget), else the largest that fits (batch 1 when none).
  MemoryBreakdown at;
  // The peak's growth per sample of the batch.
  double per_sample = 0.0;
  // With a budget: the largest batch that fits (0: none), and its search.
  int64_t largest_batch = -1;
  std::vector<BatchProbe> probes;
  // The smallest batch the model takes (1, or 2 where batch norm refuses
  // 1) and its peak.
  int64_t smallest_batch = 1, smallest_peak = 0;
  // The smallest batch measured with an activation past 2^31 - 1 elements
  // (0: none), and the most a file's samples allow (0: generated data).
  int64_t bound_batch = 0, data_limit = 0;
  int meta_steps = 0;  // meta runs, of two steps each
  double seconds = 0.0;
};

// The breakdown of one rank of `world_size` at `batch`.
StatusOr<MemoryBreakdown> MeasureBreakdown(const TrainOptions& options, int world_size, int64_t batch);

StatusOr<MemoryPlan> PlanMemory(const MemoryPlanRequest& request);

// With a budget where not even the smallest batch fits: one line saying
// why (what the model's state alone takes). Ok otherwise.
Status CheckSomeBatchFits(const MemoryPlan& plan);

// --device meta as a whole, on one rank: the request from the options (the
// world: --plan-world-size, else `job_world_size`; the overhead:
// --plan-overhead, else measured on a visible GPU, else the default), the
// plan, its table on stdout and --metrics-file's record.
Status RunMemoryPlan(const TrainOptions& options, int job_world_size);

// The table rank 0 prints, and the metrics file's {"plan": ...} record.
std::string PlanText(const MemoryPlan& plan);
nlohmann::ordered_json PlanJson(const MemoryPlan& plan);

}  // namespace ddp
