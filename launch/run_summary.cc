#include "launch/run_summary.h"

#include <sys/resource.h>

#include <algorithm>

namespace ddp {
namespace {

int64_t PeakResidentBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace

MemoryFigures MeasureMemory(const TrainComponents& parts, const ExecutionContext& ctx, Allocator& memory,
                            int64_t persistent, int64_t setup_peak) {
  MemoryFigures m;
  m.param_bytes = parts.sync->master_bytes();
  m.low_precision_bytes = parts.model->low_precision_bytes();
  for (const Buffer* b : parts.model->buffers()) m.buffer_bytes += static_cast<int64_t>(b->value.nbytes());
  m.workspace_bytes = ctx.scratch_bytes();
  m.grad_bytes = parts.sync->gradient_bytes();
  m.optimizer_bytes = parts.optimizer->state_bytes();
  m.transient_bucket_bytes = parts.sync->transient_bytes();
  m.gathered_parameter_peak_bytes = parts.sync->gathered_peak_bytes();
  m.split_gradient_peak_bytes = parts.sync->split_gradient_peak_bytes();
  m.activation_peak_bytes = memory.peak_bytes_in_use() - persistent;
  m.peak_bytes = std::max(setup_peak, memory.peak_bytes_in_use());
  m.setup_peak_bytes = setup_peak;
  m.allocated_bytes = memory.bytes_in_use();
  m.reserved_bytes = memory.reserved_bytes();
  m.peak_resident_bytes = PeakResidentBytes();
  return m;
}

RunSummary Summarize(const TrainOptions& options, const RankInfo& ranks, const TrainComponents& parts,
                     const RunMeter& meter, const RankTimes& times, const RunEnd& end, const MemoryFigures& memory) {
  RunSummary s;
  // Replayed steps have no bucket timings: exposed communication is
  // reported for eager runs only.
  meter.Fill(end.steps - parts.start_step, parts.sampler->global_batch(), end.distributed && !options.cuda_graphs, &s);
  s.model = options.model;
  s.device = options.device;
  s.precision = options.precision;
  s.compute_dtype = DTypeName(parts.precision->compute_dtype());
  s.memory_format = parts.model->channels_last() ? "channels_last" : "contiguous";
  s.world_size = ranks.world_size;
  s.batch_size = options.batch_size;
  s.accumulation_steps = options.accumulation_steps;
  s.zero_stage = parts.sync->zero_stage();
  s.steps = end.steps;
  s.total_steps = parts.total_steps;
  s.warmup_steps = meter.warmup();
  s.final_loss = end.final_loss;
  s.noun = parts.data.train->sample_noun();
  s.distributed = end.distributed;
  s.bucket_mb = options.bucket_mb;
  if (parts.step_graph) s.cuda_graph_captures = parts.step_graph->captures();
  if (parts.sync->zero()) s.zero_gather_dtype = DTypeName(parts.sync->zero()->gather_dtype());
  s.loss_scaling = parts.precision->scaler().enabled();
  s.loss_scale = parts.precision->scaler().scale();
  s.max_skipped_share = options.max_skipped_share;
  if (end.preempted) s.preempted_at_step = end.steps;
  s.compute_s = Spread(times.compute);
  s.comm_wait_s = Spread(times.wait);
  s.gpu_health = parts.gpu_summary;
  s.loader_threads = options.loader_threads;
  s.reads_files = parts.data.train->ReadsFiles();
  s.eval_accuracy = end.eval_accuracy;
  s.eval_label = end.eval_label;
  s.squad_exact_match = end.squad_exact_match;
  s.squad_f1 = end.squad_f1;
  s.seq_len = parts.data.train->tokens_per_sample();
  s.memory = memory;
  return s;
}

}  // namespace ddp
