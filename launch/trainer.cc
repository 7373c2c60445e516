#include "launch/trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "comm/watchdog.h"
#include "launch/evaluator.h"
#include "launch/preemption.h"
#include "launch/rank_times.h"
#include "launch/run_reporter.h"
#include "launch/run_summary.h"
#include "launch/step_agreement.h"
#include "launch/weights_file.h"
#include "runtime/allocator.h"
#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/timeline.h"

namespace ddp {

Trainer::Trainer(const TrainOptions& options, Communicator* comm, const RankInfo& ranks, void* cuda_stream,
                 const FaultInjection& faults)
    : options_(options),
      faults_(faults),
      comm_(comm),
      ranks_(ranks),
      ctx_(MakeContext(options, ranks, cuda_stream)),
      timeline_({options.timeline, options.timeline_first, options.timeline_last, ranks.rank, ranks.world_size}) {}

Trainer::~Trainer() {
  parts_.step_graph.reset();  // before the context, model and reducer it uses (explicitly: it holds the context)
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainOptions& options, Communicator* comm,
                                                   const RankInfo& ranks, void* cuda_stream,
                                                   const FaultInjection& faults) {
  CHECK(ranks.world_size == 1 || (comm != nullptr && comm->world_size() == ranks.world_size))
      << "several ranks need a communicator";
  // Every part talks through the counter, so each step knows what it sent.
  std::unique_ptr<CountingCommunicator> counting = comm ? std::make_unique<CountingCommunicator>(comm) : nullptr;
  std::unique_ptr<Trainer> trainer(new Trainer(options, counting.get(), ranks, cuda_stream, faults));
  trainer->counting_ = std::move(counting);
  RETURN_IF_ERROR(BuildComponents(trainer->options_, trainer->comm_, trainer->ranks_, trainer->ctx_,
                                  trainer->faults_, &trainer->progress_, &trainer->parts_));
  return trainer;
}

Status Trainer::BroadcastInitialState() {
  if (!distributed()) return Status::Ok();
  // Where ZeRO shards the master weights, they go round a bucket at a time
  // and each rank keeps its pieces (ShardParameters).
  const bool sharded = parts_.sync->shards_masters();
  std::vector<Tensor> state;
  if (!sharded) state.push_back(parts_.model->flat_parameters());
  for (Buffer* b : parts_.model->buffers()) state.push_back(b->value);
  RETURN_IF_ERROR(comm_->BroadcastCoalesced(std::move(state), 0)->Wait());
  if (sharded) return parts_.sync->ShardParameters(/*from_root=*/true);
  parts_.model->RefreshLowPrecision(ctx_);
  return Status::Ok();
}


StatusOr<Trainer::StepResult> Trainer::TrainStep(int64_t step, float lr, const Status& local_status) {
  StepResult result;
  parts_.input->StartStep();
  // Counted from this run's first step: a resumed run warms up eagerly too.
  result.graphed = options_.cuda_graphs && step - parts_.start_step >= StepGraph::kWarmupSteps;
  ASSIGN_OR_RETURN(const double in_loop_waits, ForwardBackward(step, result));
  bool local_nonfinite = false;
  ASSIGN_OR_RETURN(const StepVotes all, ReduceAndAgree(step, local_status, in_loop_waits, result, &local_nonfinite));
  // The step's reductions waited on the GPU past its backward (with
  // several ranks), so its events have happened; -1 where not yet.
  if (on_gpu() && !result.graphed) result.compute_seconds = compute_timer_.Seconds();
  ASSIGN_OR_RETURN(result.skipped,
                   parts_.precision->Verdict({step + 1, ranks_.rank, result.loss, all.nonfinite > 0, local_nonfinite},
                                             [&] { return parts_.sync->FirstNonFinite(ctx_); }));
  // A skipped step leaves weights, optimizer state and (ZeRO) the gathered
  // parameters as they were; the next step overwrites the gradients.
  if (result.skipped) return result;
  Precision::Unscale(ctx_, parts_.sync->Held(), result.loss_scale);
  if (options_.clip_grad_norm > 0.0) RETURN_IF_ERROR(parts_.sync->ClipToNorm(ctx_, options_.clip_grad_norm));
  {
    const TimelineScope timed(ctx_, "optimizer step", "optimizer");
    RETURN_IF_ERROR(parts_.optimizer->Step(ctx_, lr));
  }
  RETURN_IF_ERROR(parts_.sync->AfterUpdate(ctx_));
  return result;
}

StatusOr<double> Trainer::ForwardBackward(int64_t step, StepResult& result) {
  const int64_t k = options_.accumulation_steps;
  double loss_sum = 0.0;
  if (result.graphed) {
    ASSIGN_OR_RETURN(const double mean, ReplayMicroBatches(step));
    loss_sum = mean * static_cast<double>(k);
  }
  // Compute time: forward and backward until the last gradient is ready,
  // input and in-loop collective waits aside; on a GPU between events on
  // the compute stream (host clocks would time the launches).
  const double compute_start = SteadySeconds();
  double in_loop_waits = 0.0;
  const bool gpu_timing = on_gpu() && !result.graphed;
  if (gpu_timing) compute_timer_.Start(ctx_.cuda_stream());
  for (int64_t micro = 0; micro < k && !result.graphed; ++micro) {
    // Micro-batch losses are means; the step's gradient is their mean over
    // micro-batches and ranks. Dividing the loss gradient by K x world here
    // makes the reducer's job a plain sum, and N ranks compute exactly what
    // one rank with N micro-batches does.
    // Under loss scaling the gradient carries the scale through backward.
    const double loss_grad = parts_.precision->LossGradient(k * ranks_.world_size);
    const bool accumulate = micro > 0 && !parts_.sync->reduces_each_micro_batch();
    // The model runs its loss on the batch's named tensors.
    const Batch batch = parts_.input->Next(step, micro);
    result.tokens += batch.real_tokens;
    if (parts_.profiler) parts_.profiler->ForwardStarted();
    loss_sum += parts_.model->ForwardLoss(ctx_, batch).loss;
    if (parts_.profiler) parts_.profiler->ForwardFinished();
    faults_.BetweenForwardAndBackward(step + 1, micro, ranks_.rank, ctx_, batch.first_sample, options_.comm_timeout_s);
    parts_.sync->PrepareForBackward(micro, k);
    const bool last = micro == k - 1;
    if (parts_.profiler) parts_.profiler->BackwardStarted(last);
    if (probe_ && last) probe_->BackwardStarted();
    const double backward_start = SteadySeconds();
    parts_.model->BackwardLoss(ctx_, loss_grad, accumulate);
    if (last) result.last_backward_seconds = SteadySeconds() - backward_start;
    if (probe_ && last) probe_->BackwardFinished();
    if (parts_.profiler) parts_.profiler->BackwardFinished();
    ASSIGN_OR_RETURN(const double exposed, parts_.sync->WaitMicroBatch(micro, k));
    result.exposed_comm_seconds += exposed;
    in_loop_waits += exposed;
  }
  if (gpu_timing) compute_timer_.Stop(ctx_.cuda_stream());
  result.compute_seconds = result.graphed && on_gpu()
                               ? -1.0  // a replayed graph: no events inside it
                               : SteadySeconds() - compute_start - parts_.input->wait_seconds() - in_loop_waits;
  result.loss = loss_sum / static_cast<double>(k);
  result.loss_scale = parts_.precision->scaler().scale();
  result.input_wait_seconds = parts_.input->wait_seconds();
  result.replaced_samples = parts_.input->replaced_samples();
  return in_loop_waits;
}

StatusOr<StepVotes> Trainer::ReduceAndAgree(int64_t step, const Status& local_status, double in_loop_waits,
                                            StepResult& result, bool* local_nonfinite) {
  // Whether the pending checkpoint's files are durable on this rank (a
  // write that finished, checked for its error), without waiting for it.
  const TrainCheckpoints::LocalWrite write =
      parts_.checkpoints ? parts_.checkpoints->PollLocal() : TrainCheckpoints::LocalWrite();
  // A failed gradient reduction is this rank's error, shared below like any
  // other: the others must not wait for it.
  const double wait_start = SteadySeconds();
  StatusOr<ReduceStats> waited = parts_.sync->Wait(result.graphed);
  if (distributed()) {
    Timeline::Get().Add("wait for gradients", "wait", Timeline::kCommTrack, wait_start, SteadySeconds() - wait_start);
  }
  // A collective that failed on this rank leaves the communicator in no
  // state to agree on anything, and peers may be waiting inside it: the
  // job ends here, with the reason.
  if (!waited.ok()) {
    CollectiveWatchdog::EndJob("gradient reduction failed at step " + std::to_string(step + 1) + ": " +
                               waited.status().message() + "; ending the job");
  }
  const ReduceStats stats = waited.ok() ? *waited : ReduceStats();
  RunTimeline::AddBucketEvents(stats, parts_.sync->collective());
  const Status step_status = !local_status.ok() ? local_status : waited.status();
  result.exposed_comm_seconds += stats.exposed_seconds;
  result.buckets = stats.buckets;
  // Whether this rank's gradients are all finite: one check per optimizer
  // step, after reduction, over what the rank holds (its pieces under ZeRO).
  faults_.PoisonGradients(step + 1, ranks_.rank, parts_.sync->Held());
  *local_nonfinite = !parts_.sync->HeldFinite(ctx_);
  // The step's loss, whether any rank hit a local error or holds
  // non-finite gradients, and how the pending checkpoint's write stands on
  // each rank, decided together: no rank stops, skips a step or commits
  // alone.
  StepVotes mine;
  mine.loss = result.loss;
  mine.failed = step_status.ok() ? 0 : 1;
  mine.nonfinite = *local_nonfinite ? 1 : 0;
  mine.tokens = result.tokens;
  mine.checkpoint_durable = write.durable && write.status.ok() ? 1 : 0;
  mine.checkpoint_failed = write.status.ok() ? 0 : 1;
  mine.stop = PreemptionSignal() != 0 ? 1 : 0;
  mine.input_wait_s = result.input_wait_seconds;
  mine.replaced_samples = result.replaced_samples;
  const double shared_start = SteadySeconds();
  ASSIGN_OR_RETURN(const StepVotes all, SumStepVotes(comm_, mine));
  if (distributed()) result.comm_wait_seconds = stats.exposed_seconds + in_loop_waits + (SteadySeconds() - shared_start);
  if (!step_status.ok()) return step_status;
  if (all.failed > 0) return FailedPrecondition("another rank failed; stopping");
  if (!write.status.ok()) return write.status;
  if (all.checkpoint_failed > 0) {
    return FailedPrecondition("another rank failed to write the checkpoint of step " +
                              std::to_string(parts_.checkpoints->pending_step()) + "; stopping");
  }
  result.loss = all.loss / ranks_.world_size;
  result.tokens = all.tokens;
  result.checkpoint_ready = all.checkpoint_durable == ranks_.world_size;
  result.stop = all.stop > 0;
  result.input_wait_seconds = all.input_wait_s / ranks_.world_size;
  result.replaced_samples = all.replaced_samples;
  return all;
}

StatusOr<double> Trainer::ReplayMicroBatches(int64_t step) {
  for (int64_t micro = 0; micro < options_.accumulation_steps; ++micro) {
    parts_.input->FillInto(step, micro, parts_.step_graph->input(micro));
  }
  return parts_.step_graph->Replay(parts_.precision->scaler().scale());
}

void Trainer::PrintStateDigest(int64_t step) {
  // Under ZeRO only this rank's pieces of the master weights are current.
  ddp::PrintStateDigest(ranks_.rank, step + 1, parts_.sync->MasterWeights(), parts_.optimizer->state(), parts_.optimizer->steps(),
                        parts_.precision->scaler().scale());
}

StatusOr<double> Trainer::Evaluate() {
  RETURN_IF_ERROR(parts_.sync->FinishGather());
  // Ranks may evaluate different numbers of batches, so ZeRO-3 cannot
  // gather per layer there: every parameter is gathered for the evaluation.
  const bool gathered_here = parts_.sync->zero_stage() == 3 && !parts_.model->flat_parameters().defined();
  if (gathered_here) RETURN_IF_ERROR(parts_.sync->GatherMasterWeights());
  EvaluatorOptions e;
  e.batch_size = options_.batch_size;
  e.rank = ranks_.rank;
  e.world_size = ranks_.world_size;
  e.print_digest = faults_.print_state_digest;
  ASSIGN_OR_RETURN(const Evaluation evaluation,
                   ddp::Evaluate(ctx_, *parts_.model, *parts_.data.eval, comm_, e, parts_.optimizer->steps()));
  eval_label_ = evaluation.label;
  eval_outputs_ = evaluation.sample_outputs;
  if (gathered_here) parts_.sync->ReleaseMasterWeights();
  return evaluation.accuracy;
}

Status Trainer::ReportAnswerSpans(RunEnd* end) {
  std::vector<FeatureSpan> spans;
  const int64_t n = eval_outputs_.dim(0), width = eval_outputs_.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    const double* row = eval_outputs_.data<double>() + i * width;
    spans.push_back(FeatureSpan{static_cast<int64_t>(row[0]), static_cast<int64_t>(row[1]), row[2]});
  }
  if (!options_.predictions_file.empty()) RETURN_IF_ERROR(WriteFeatureSpans(options_.predictions_file, spans));
  if (!parts_.data.squad) return Status::Ok();
  const TrainingData::Squad& squad = *parts_.data.squad;
  ASSIGN_OR_RETURN(const SquadScores scores, ScoreSpans(squad.set, squad.example_index, squad.offset_mapping, spans,
                                                         "--eval-data " + options_.eval_data));
  end->squad_exact_match = scores.exact_match;
  end->squad_f1 = scores.f1;
  return Status::Ok();
}

StatusOr<TrainResult> Trainer::Run() {
  if (is_root()) {
    std::printf("%s\n", StartLine({options_.model, options_.device, options_.optimizer, parts_.data.train->Describe(),
                                   parts_.model->num_parameters(), options_.batch_size, options_.accumulation_steps,
                                   parts_.total_steps, ranks_.world_size, ctx_.num_threads(), options_.lr})
                           .c_str());
    std::fflush(stdout);
  }
  // Untimed: two eager steps (allocation, algorithm search), and under
  // --cuda-graphs the step that captures the graph as well.
  RunState run(std::min<int64_t>(options_.cuda_graphs ? StepGraph::kWarmupSteps + 1 : 2,
                                 parts_.total_steps - parts_.start_step - 1));
  // Everything allocated from here on is per-step working memory
  // (activations, their gradients, transient buffers).
  Allocator* memory = GetAllocator(ctx_.device());  // the rank's device: host or GPU
  run.persistent_in_use = memory->bytes_in_use();
  run.setup_peak = memory->peak_bytes_in_use();
  memory->ResetPeak();
  progress_ = ProgressPrinter(options_.log_every, StdoutIsATerminal());
  run.start = SteadySeconds();
  if (timeline_.enabled()) RETURN_IF_ERROR(timeline_.Start(comm_, ctx_));
  for (int64_t step = parts_.start_step; step < parts_.total_steps; ++step) {
    CollectiveWatchdog::SetPhase("step " + std::to_string(step + 1));
    Timeline::Get().SetStep(step + 1, step + 1 >= options_.timeline_first && step + 1 <= options_.timeline_last);
    const float lr = static_cast<float>(options_.schedule.At(step));
    const bool timed = run.meter.timed(step - parts_.start_step);
    if (probe_) RETURN_IF_ERROR(probe_->StepStarting(timed));
    const double start = SteadySeconds();
    const Traffic sent_before = counting_ ? counting_->sent() : Traffic();
    // Counted from the first timed step, less what the step before it has
    // yet to gather (ZeRO): that goes at this step's forward.
    if (timed && step == parts_.start_step + run.meter.warmup()) {
      run.traffic_from = sent_before;
      run.traffic_from += parts_.sync->UnsentGather();
    }
    ASSIGN_OR_RETURN(const StepResult r, TrainStep(step, lr, run.local));
    const double seconds = SteadySeconds() - start;
    // A replayed graph issues no collective through the communicator: it
    // sends what the eager step before it sent (DDP: no ZeRO gathers defer).
    if (counting_ && r.graphed) counting_->AddReplayed(run.eager_traffic);
    if (counting_ && !r.graphed) run.eager_traffic = counting_->sent() - sent_before;
    if (probe_) RETURN_IF_ERROR(probe_->StepFinished(r.last_backward_seconds));
    if (parts_.profiler) parts_.profiler->StepFinished(seconds, timed);
    run.meter.AddStep(step - parts_.start_step, seconds, r.exposed_comm_seconds, r.tokens, r.input_wait_seconds,
                      r.compute_seconds, r.comm_wait_seconds, r.replaced_samples, r.skipped);
    run.result.final_loss = r.loss;
    if (faults_.print_state_digest) PrintStateDigest(step);
    // Preempted: every rank stops after this step, with a checkpoint of it.
    // (A signal during the last step changes nothing: the run finishes.)
    const bool stop = r.stop && step + 1 < parts_.total_steps;
    if (stop) run.result.preempted_at_step = step + 1;
    RETURN_IF_ERROR(AfterStep(step, lr, seconds, r, stop, run));
    if (stop) break;
  }
  return FinishRun(run, *memory);
}

StatusOr<MetaRunFigures> Trainer::RunMeta() {
  CHECK(ctx_.device().is_meta()) << "RunMeta on " << ctx_.device().ToString();
  MetaAllocator* memory = GetMetaAllocator();
  // As the start-up broadcast of a real run leaves it, the parameters'
  // part of it made as there (a bucket at a time, through a staging bucket
  // where the model stayed on the host).
  RETURN_IF_ERROR(parts_.sync->ShardParameters(/*from_root=*/distributed()));
  MetaRunFigures figures;
  figures.persistent = memory->bytes_in_use();
  figures.workspace_at_start = ctx_.scratch_bytes();
  const int64_t setup_peak = memory->peak_bytes_in_use();
  memory->ResetPeakSite();
  for (int64_t step = parts_.start_step; step < parts_.total_steps; ++step) {
    RETURN_IF_ERROR(TrainStep(step, static_cast<float>(options_.schedule.At(step)), Status::Ok()).status());
  }
  figures.memory = MeasureMemory(parts_, ctx_, *memory, figures.persistent, setup_peak);
  figures.input_bytes = parts_.input->meta_batch_bytes();
  figures.parameter_count = static_cast<int64_t>(parts_.model->num_parameters());
  return figures;
}

Status Trainer::AfterStep(int64_t step, float lr, double seconds, const StepResult& r, bool stop, RunState& run) {
  StepRecord record;
  record.step = step + 1;
  record.total_steps = parts_.total_steps;
  record.loss = r.loss;
  record.lr = lr;
  record.seconds = seconds;
  record.samples_per_step = parts_.sampler->global_batch();
  record.noun = parts_.data.train->sample_noun();
  record.seq_len = parts_.data.train->tokens_per_sample();
  record.tokens = r.tokens;
  record.loss_scaling = parts_.precision->scaler().enabled();
  record.loss_scale = r.loss_scale;
  record.skipped = r.skipped;
  record.graphed = r.graphed;
  record.input_wait_s = r.input_wait_seconds;
  record.replaced_samples = r.replaced_samples;
  record.distributed = distributed();
  record.exposed_comm_s = r.exposed_comm_seconds;
  for (const BucketTiming& b : r.buckets) record.buckets.push_back({b.launched, b.finished, b.waited});
  // Checkpoints: the pending one, once every rank's files are durable, is
  // committed by rank 0; every --checkpoint-every steps a new one starts,
  // stalling the step only for the copy to host memory (and for the
  // previous write, if it is still going).
  if (r.checkpoint_ready) {
    const Uncounted committing(counting_.get());
    const int64_t committed_step = parts_.checkpoints->pending_step();
    const Status committed = parts_.checkpoints->Commit();
    if (committed.ok() && is_root()) record.checkpoint_committed = committed_step;
    if (!committed.ok() && run.local.ok()) run.local = committed;  // every rank learns of it at the next step
  }
  // Not on the step a preemption stops at: the checkpoint commits after
  // the loop, and the grace before SIGKILL is short.
  const bool evaluate = parts_.data.eval != nullptr && options_.eval_every > 0 &&
                        (step + 1) % options_.eval_every == 0 && step + 1 < parts_.total_steps && !stop;
  const bool checkpoint = parts_.checkpoints && parts_.checkpoints->Due(step + 1, stop);
  // The step's parameter gather, counted as the step's before checkpoints
  // and evaluation, which send no step's bytes.
  if (evaluate || checkpoint) RETURN_IF_ERROR(parts_.sync->FinishGather());
  const Uncounted between_steps(counting_.get());
  if (checkpoint) {
    const double stall_start = SteadySeconds();
    RETURN_IF_ERROR(parts_.checkpoints->Begin(step + 1));
    const double stall = SteadySeconds() - stall_start;
    record.checkpoint_stall_s = stall;
    Timeline::Get().Add("checkpoint stall", "checkpoint", Timeline::kComputeTrack, stall_start, stall);
    run.meter.AddStall(step - parts_.start_step, stall);  // throughput counts what checkpoints cost the run
  }
  if (evaluate) {
    ASSIGN_OR_RETURN(record.eval_accuracy, Evaluate());
    record.eval_label = eval_label_;
  }
  if (!is_root()) return Status::Ok();
  const double now = SteadySeconds();
  const bool keep = evaluate || r.skipped;
  if (progress_.Due(step + 1, parts_.total_steps, keep, now)) {
    // The time left, at this run's pace so far (evaluations and
    // checkpoints included).
    const double per_step = (now - run.start) / static_cast<double>(step + 1 - parts_.start_step);
    if (step + 1 < parts_.total_steps) record.eta_s = per_step * static_cast<double>(parts_.total_steps - step - 1);
    progress_.Print(StepLine(record), keep, now);
  }
  // A failed write is this rank's trouble, shared at the next step.
  const nlohmann::ordered_json json = StepJson(record);
  const Status written = parts_.metrics.Write(json);
  if (run.local.ok()) run.local = written;
  const Status plotted = parts_.tensorboard.AddScalars(step + 1, RecordScalars(json));
  if (run.local.ok()) run.local = plotted;
  // Input that keeps the step waiting: said once, over the timed steps.
  if (const auto warning =
          run.meter.InputWaitWarning(step + 1 == parts_.total_steps, options_.loader_threads, options_.prefetch)) {
    progress_.EndLine();
    std::printf("%s\n", warning->c_str());
    std::fflush(stdout);
  }
  return Status::Ok();
}

Status Trainer::SaveWeights() {
  GradientSync& sync = *parts_.sync;
  Status saved;
  if (sync.shards_masters()) {
    // Every rank gathers, rank 0 writes: the whole model is never on one.
    saved = SaveWeightsFileInPieces(
        options_.save_weights, *parts_.model, ctx_, options_.model, is_root(), [&sync](const FlatPieceVisitor& visit) {
          return sync.ForEachMasterBucket(
              [&visit](const BucketPlan& plan, const Tensor& values) { return visit(plan.offset, values); });
        });
  } else if (is_root()) {
    saved = SaveWeightsFile(options_.save_weights, *parts_.model, ctx_, options_.model);
  }
  // Decided together: no rank goes on alone into evaluation's collectives.
  return AgreeOnStatus(comm_, saved, "rank 0 could not write --save-weights; stopping");
}

StatusOr<TrainResult> Trainer::FinishRun(RunState& run, Allocator& memory) {
  CollectiveWatchdog::SetPhase("the end of the run");
  // The last step's parameter gather is its own; nothing after it is a step's.
  RETURN_IF_ERROR(parts_.sync->FinishGather());
  if (counting_) run.meter.SetTimedTraffic(counting_->sent() - run.traffic_from);
  const Uncounted run_end(counting_.get());
  MarkPreemptionAnswered();  // a signal's step boundary, or the run's end
  progress_.EndLine();
  if (timeline_.enabled()) RETURN_IF_ERROR(timeline_.Write(comm_, parts_.total_steps));
  if (parts_.health) parts_.health->StopAndRecord(&parts_.gpu_summary);
  // A metrics write that failed after the last step (rank 0 only): decided
  // together, so no rank goes on alone into evaluation's collectives.
  RETURN_IF_ERROR(AgreeOnStatus(comm_, run.local, "another rank failed; stopping"));
  // The last checkpoint's write, waited for and committed.
  if (parts_.checkpoints && parts_.checkpoints->pending()) RETURN_IF_ERROR(parts_.checkpoints->Finish());
  ASSIGN_OR_RETURN(const RankTimes times, GatherRankTimes(comm_, run.meter.compute_times(), run.meter.wait_times()));
  TrainResult& result = run.result;
  RunEnd end;
  end.preempted = result.preempted_at_step >= 0;
  // A preempted run is not finished: its checkpoint holds the state, and
  // neither --save-weights nor the final evaluation runs. Where ZeRO holds
  // the f32 master weights in shards, the saved file is written a bucket
  // at a time as each is gathered, and ZeRO-3's evaluation gathers them
  // all for its moment (stages 1 and 2 evaluate on their working copy).
  const bool saving = !options_.save_weights.empty() && !end.preempted;
  const bool evaluating = parts_.data.eval != nullptr && !end.preempted;
  end.steps = end.preempted ? result.preempted_at_step : parts_.total_steps;
  end.distributed = distributed();
  end.final_loss = result.final_loss;
  RunSummary timed;
  run.meter.Fill(end.steps - parts_.start_step, parts_.sampler->global_batch(), false, &timed);
  result.compute_dtype = parts_.precision->compute_dtype();
  result.skipped_steps = timed.skipped_steps;
  result.samples_per_s = timed.samples_per_s;
  result.preemption_signal = PreemptionSignal();
  if (saving) RETURN_IF_ERROR(SaveWeights());
  const bool gathered = evaluating && parts_.sync->zero_stage() == 3;
  if (gathered) RETURN_IF_ERROR(parts_.sync->GatherMasterWeights());
  // After the weights are safe: an evaluation that fails loses no training.
  if (evaluating) {
    ASSIGN_OR_RETURN(result.eval_accuracy, Evaluate());
    end.eval_accuracy = result.eval_accuracy;  // the model's first count
    end.eval_label = eval_label_;
  }
  // The summary's memory record is of training, not of this moment.
  if (gathered) parts_.sync->ReleaseMasterWeights();
  if (!is_root()) return result;
  if (eval_outputs_.defined() && !end.preempted) RETURN_IF_ERROR(ReportAnswerSpans(&end));
  if (parts_.profiler) {
    ProfileRun profiled{options_.model, options_.device, options_.precision, "", ranks_.world_size,
                        ctx_.num_threads(), options_.accumulation_steps, parts_.sampler->global_batch(),
                        options_.batch_size, options_.image_size, parts_.data.train->tokens_per_sample()};
    if (parts_.gpu_summary.contains("peer_access")) profiled.peer_access = parts_.gpu_summary["peer_access"]["state"];
    RETURN_IF_ERROR(WriteStepProfile(options_.profile_file, *parts_.profiler, profiled));
  }
  for (const std::string& line : StragglerWarnings(times)) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  const RunSummary summary = Summarize(options_, ranks_, parts_, run.meter, times, end,
                                       MeasureMemory(parts_, ctx_, memory, run.persistent_in_use, run.setup_peak));
  RETURN_IF_ERROR(parts_.metrics.Write({{"summary", SummaryJson(summary)}}));
  RETURN_IF_ERROR(parts_.tensorboard.AddScalars(end.steps, SummaryScalars(summary)));
  std::fputs(SummaryText(summary).c_str(), stdout);
  return result;
}

}  // namespace ddp
