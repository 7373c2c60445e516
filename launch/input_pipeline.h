// A rank's training input: micro-batch `micro` of step `step`, as the
// sampler assigns it (runtime/data/sampler.h), on the rank's device. Three
// ways, chosen once: generated in place on the GPU (synthetic data, no
// host work and no copy); staged by the loader (runtime/data/batch_stager.h:
// file data, or any host data for a GPU rank), filled ahead on loader
// threads; or filled in place on the host. Counts the step's wait for input
// and its replaced (undecodable) samples.
//
// On the meta device (a memory plan) batches are meta tensors of the
// data's shapes, read from nothing: one batch, or where the planned
// device's loader stages them (file data; any host data for a CUDA rank)
// --prefetch more, as many as the stager would hold there.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/batch.h"
#include "runtime/data/batch_source.h"
#include "runtime/data/batch_stager.h"
#include "runtime/data/sampler.h"
#include "runtime/execution_context.h"

namespace ddp {

struct InputPipelineOptions {
  int64_t batch_size = 1, accumulation_steps = 1;
  int rank = 0, world_size = 1;
  int64_t start_step = 0, total_steps = 0;  // the loader prefetches no further than the run goes
  int prefetch = 2;                         // --prefetch: batches staged ahead
};

class InputPipeline {
 public:
  // `data`, `sampler` and `ctx` (the rank's: its device and compute stream)
  // outlive the pipeline.
  InputPipeline(InputPipelineOptions options, const BatchSource* data, GlobalBatchSampler* sampler,
                ExecutionContext& ctx);

  // Starts a step's figures anew.
  void StartStep();
  // Micro-batches in run order: valid until the next call.
  Batch Next(int64_t step, int64_t micro);
  // Micro-batch `micro` of `step` into `inputs` (a CUDA graph's own
  // buffers, on the device).
  void FillInto(int64_t step, int64_t micro, Batch& inputs);

  // This step's so far: seconds waited for input, samples replaced.
  double wait_seconds() const { return wait_seconds_; }
  int64_t replaced_samples() const { return replaced_samples_; }
  bool staged() const { return stager_ != nullptr; }
  // On the meta device: the bytes of the meta batches.
  int64_t meta_batch_bytes() const;
  // The global index of micro-batch `micro`'s first sample on this rank
  // (the sampler's block micro * world + rank): dropout masks follow it, so
  // N ranks draw what one rank with N accumulated micro-batches draws.
  int64_t FirstSample(int64_t micro) const {
    return (micro * options_.world_size + options_.rank) * options_.batch_size;
  }

 private:
  InputPipelineOptions options_;
  const BatchSource* data_;
  GlobalBatchSampler* sampler_;
  ExecutionContext& ctx_;
  Batch batch_;                          // filled in place (host, or generated on the GPU)
  std::unique_ptr<BatchStager> stager_;  // or staged by the loader
  std::vector<Batch> meta_batches_;      // the meta device's, in turn
  size_t next_meta_ = 0;
  int64_t prefetched_ = 0;               // micro-batches handed to the stager, counted over the run
  double wait_seconds_ = 0.0;
  int64_t replaced_samples_ = 0;
};

}  // namespace ddp
