#include "launch/input_pipeline.h"

#include <glog/logging.h>

#include "runtime/clock.h"
#include "runtime/timeline.h"

namespace ddp {

InputPipeline::InputPipeline(InputPipelineOptions options, const BatchSource* data, GlobalBatchSampler* sampler,
                             ExecutionContext& ctx)
    : options_(options), data_(data), sampler_(sampler), ctx_(ctx) {
  // The device the batches are for: a meta context's planned one. One
  // decision serves training and plans alike.
  const bool gpu = ctx_.planned_device().is_cuda();
  const bool generated = gpu && data_->GeneratesOnDevice();
  const bool staged = !generated && (gpu || data_->ReadsFiles());
  const int64_t b = options_.batch_size;
  if (ctx_.device().is_meta()) {
    // As many batches as the planned device holds, of the data's shapes.
    for (int slot = 0; slot < (staged ? options_.prefetch + 1 : 1); ++slot) {
      meta_batches_.push_back(AllocateBatch(*data_, b, ctx_.device()));
    }
  } else if (generated) {
    // Synthetic data is made on the GPU, in place, each micro-batch: no host
    // work, no copy (the benchmark measures training).
    batch_ = AllocateBatch(*data_, b, ctx_.device());
  } else if (staged) {
    // Filled ahead by the loader: into pinned buffers copied to the GPU on
    // a stream of their own, or on a CPU rank, host batches decoded while
    // the step computes.
    stager_ = std::make_unique<BatchStager>(data_, b, gpu ? ctx_.device().index : -1, ctx_.cuda_stream(),
                                            options_.prefetch);
  } else {
    batch_ = AllocateBatch(*data_, b, Device::Cpu());  // in memory or generated: filled in place
  }
  prefetched_ = options_.start_step * options_.accumulation_steps;
}

void InputPipeline::StartStep() {
  wait_seconds_ = 0.0;
  replaced_samples_ = 0;
}

Batch InputPipeline::Next(int64_t step, int64_t micro) {
  const int64_t k = options_.accumulation_steps;
  const double load_start = SteadySeconds();
  Batch batch;
  if (!meta_batches_.empty()) {
    // Shapes come from the data's specs alone: nothing to read or fill.
    batch = meta_batches_[next_meta_++ % meta_batches_.size()];
  } else if (!stager_) {
    const double start = SteadySeconds();
    const std::vector<int64_t> indices = sampler_->MicroBatch(step, micro);
    if (batch_.tensors.front().second.device().is_cuda()) {
      // Generated data: the sampler's indices are consecutive.
      data_->FillRangeOnDevice(ctx_, indices.front(), batch_);
    } else {
      data_->Fill(indices.data(), static_cast<int64_t>(indices.size()), sampler_->EpochOf(step), batch_);
    }
    batch = batch_;
    wait_seconds_ += SteadySeconds() - start;
  } else {
    // Micro-batches are consumed in run order, so the stager's queue always
    // starts at this one: keep it as full as it goes, within the run.
    CHECK_EQ(prefetched_ - stager_->queued(), step * k + micro) << "micro-batches out of order";
    auto top_up = [&] {
      while (prefetched_ < options_.total_steps * k && stager_->queued() < stager_->depth()) {
        const int64_t s = prefetched_ / k;
        stager_->Prefetch(sampler_->MicroBatch(s, prefetched_ % k), sampler_->EpochOf(s));
        ++prefetched_;
      }
    };
    top_up();
    batch = stager_->Next();
    wait_seconds_ += stager_->last_wait_seconds();
    top_up();
  }
  replaced_samples_ += batch.replaced_samples;
  Timeline::Get().Add("input", "input", Timeline::kDataTrack, load_start, SteadySeconds() - load_start);
  batch.step = step;
  batch.first_sample = FirstSample(micro);
  return batch;
}

int64_t InputPipeline::meta_batch_bytes() const {
  int64_t bytes = 0;
  for (const Batch& batch : meta_batches_) {
    for (const auto& named : batch.tensors) bytes += static_cast<int64_t>(named.second.nbytes());
  }
  return bytes;
}

void InputPipeline::FillInto(int64_t step, int64_t micro, Batch& inputs) {
  if (stager_) {
    CopyBatch(ctx_, Next(step, micro), inputs);
    return;
  }
  // Generated on the device: the sampler's indices are consecutive.
  data_->FillRangeOnDevice(ctx_, sampler_->MicroBatch(step, micro).front(), inputs);
  inputs.step = step;
  inputs.first_sample = FirstSample(micro);
}

}  // namespace ddp
