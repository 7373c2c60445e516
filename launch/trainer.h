// The training loop of one rank: the step (micro-batches with gradient
// accumulation, the gradient synchronization, the step's agreement, the
// update) and the run (steps, checkpoints, evaluation, reports, the end).
// Every other job is a part (launch/train_components.h lists them), built
// before the loop and called from it.
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap.h"
#include "comm/communicator.h"
#include "comm/contention_probe.h"
#include "comm/counting_communicator.h"
#include "launch/fault_injection.h"
#include "launch/peer_access.h"
#include "launch/progress.h"
#include "launch/run_reporter.h"
#include "launch/run_timeline.h"
#include "launch/step_agreement.h"
#include "launch/train_components.h"
#include "launch/train_options.h"
#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/execution_context.h"

namespace ddp {

struct RunEnd;

struct TrainResult {
  double final_loss = 0.0;
  double samples_per_s = 0.0;
  double eval_accuracy = -1.0;  // -1 without --eval-data
  DType compute_dtype = DType::kF32;  // activations' dtype: bf16 under --precision bf16 (where the CPU has it)
  int64_t skipped_steps = 0;          // steps skipped for non-finite gradients (loss scaling)
  // Stopped early by SIGUSR1 or SIGTERM (launch/preemption.h): the step it
  // stopped after (its checkpoint's, with --checkpoint-dir), and the signal
  // (0 when another rank received it).
  int64_t preempted_at_step = -1;
  int preemption_signal = 0;
};

// What --device meta's steps allocated (launch/memory_planner.h).
struct MetaRunFigures {
  MemoryFigures memory;     // as a run's summary reports them
  int64_t persistent = 0;   // in use as the steps began
  int64_t workspace_at_start = 0;  // of it, the scratch slots' bytes
  int64_t input_bytes = 0;  // the input batches the planned device holds
  int64_t parameter_count = 0;  // the model's parameters (elements)
};

class Trainer {
 public:
  // Opens data and files, builds the model and optimizer. Every user error
  // (bad file, mismatched weights, unwritable metrics) is returned here,
  // before any training or communication. `comm` may be null for one rank.
  // With options.gpu >= 0 the rank trains on that CUDA device, its kernels
  // on `cuda_stream` (which must be the device's current stream, so the
  // caching allocator and tensor copies follow it).
  // `faults`: the test hooks (launch/fault_injection.h), none by default.
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainOptions& options, Communicator* comm = nullptr,
                                                  const RankInfo& ranks = RankInfo(), void* cuda_stream = nullptr,
                                                  const FaultInjection& faults = FaultInjection());

  ~Trainer();

  int64_t num_parameters() const { return parts_.model->num_parameters(); }
  // The step this run starts at: 0, or the resumed checkpoint's.
  int64_t start_step() const { return parts_.start_step; }
  // Samples in --data (BatchSource::kEndless for generated data).
  int64_t dataset_size() const { return parts_.data.train->size(); }
  // Collective: rank 0's parameters and buffers become every rank's. Call on
  // every rank once Create succeeded everywhere.
  Status BroadcastInitialState();
  // Collective when several ranks run: every rank trains; rank 0 prints and
  // writes files.
  StatusOr<TrainResult> Run();
  // On the meta device: the run's steps, with no line printed and no file
  // written, and what the allocator saw.
  StatusOr<MetaRunFigures> RunMeta();
  // --contention-probe: this rank trains alone and `probe` (over every
  // rank) loads or times each step around it (comm/contention_probe.h).
  void set_contention_probe(ContentionProbe* probe) { probe_ = probe; }
  // What was decided about NCCL's peer-to-peer on this node
  // (launch/peer_access.h): the summary's gpu_health records it.
  void RecordPeerAccess(const PeerAccessDecision& decision) {
    if (on_gpu()) parts_.gpu_summary["peer_access"] = PeerAccessJson(decision);
  }

 private:
  Trainer(const TrainOptions& options, Communicator* comm, const RankInfo& ranks, void* cuda_stream,
          const FaultInjection& faults);
  bool on_gpu() const { return ctx_.device().is_cuda(); }
  // --cuda-graphs: the inputs of `step`'s micro-batches into the graph's
  // buffers, then the replay (launch/step_graph.h). Returns the mean loss.
  StatusOr<double> ReplayMicroBatches(int64_t step);
  // Gradients go through a communicator: several ranks, or one rank asked to
  // use NCCL anyway (--comm nccl, a smoke test of the data plane).
  bool distributed() const { return comm_ != nullptr; }
  bool is_root() const { return ranks_.rank == 0; }
  struct StepResult {
    double loss = 0.0;  // mean over ranks and micro-batches
    double loss_scale = 1.0;  // the scale this step's loss gradient had
    bool skipped = false;     // a rank saw non-finite gradients: no update
    bool graphed = false;     // replayed from a CUDA graph: no per-bucket timings
    int64_t tokens = 0;       // token data: non-padding tokens of the step, every rank's
    double input_wait_seconds = 0.0;  // waiting for input, the mean over ranks
    // This rank's: forward and backward until its last gradient was ready
    // (-1: unknown, a replayed graph), and the time it waited in the step's
    // collectives (the gradient reduction's wait and the shared all-reduce).
    double compute_seconds = -1.0, comm_wait_seconds = 0.0;
    double last_backward_seconds = 0.0;  // the step's last backward, on the host's clock (the contention probe's)
    int64_t replaced_samples = 0;     // files that would not decode, replaced: every rank's
    double exposed_comm_seconds = 0.0;
    std::vector<BucketTiming> buckets;  // per bucket: launch, finish, wait
    // The checkpoint being written: every rank's files are durable (commit
    // it), or some rank's write failed.
    bool checkpoint_ready = false, checkpoint_failed = false;
    bool stop = false;  // a rank received SIGUSR1 or SIGTERM: every rank stops after this step
  };
  StatusOr<StepResult> TrainStep(int64_t step, float lr, const Status& local_status);
  // The step's micro-batches, forward and backward (or the CUDA graph's
  // replay), into `result`: the loss, tokens, compute time and input
  // figures. Returns the seconds waited inside the loop (ZeRO-2).
  StatusOr<double> ForwardBackward(int64_t step, StepResult& result);
  // The gradient reduction's end, this rank's gradients checked, and the
  // step's votes summed over the ranks (launch/step_agreement.h), into
  // `result`; an error any rank hit stops every rank here.
  StatusOr<StepVotes> ReduceAndAgree(int64_t step, const Status& local_status, double in_loop_waits,
                                     StepResult& result, bool* local_nonfinite);
  // What a run carries from step to step.
  struct RunState {
    explicit RunState(int64_t warmup) : meter(warmup) {}
    RunMeter meter;
    TrainResult result;
    Status local;  // this rank's own trouble (a failed metrics write), shared at the next step
    double start = 0.0;
    int64_t persistent_in_use = 0, setup_peak = 0;  // the allocator's, as training began
    // What this rank sent: counted from the first timed step on; the last
    // eager step's, which a replayed CUDA graph sends too.
    Traffic traffic_from, eager_traffic;
  };
  // Collectives between steps (evaluation, checkpoints) are not a step's:
  // uncounted while one of these lives.
  class Uncounted {
   public:
    explicit Uncounted(CountingCommunicator* c) : c_(c) {
      if (c_) c_->set_counting(false);
    }
    ~Uncounted() {
      if (c_) c_->set_counting(true);
    }

   private:
    CountingCommunicator* c_;
  };
  // After step `step`: its record, checkpoints, evaluation and reports.
  Status AfterStep(int64_t step, float lr, double seconds, const StepResult& r, bool stop, RunState& run);
  // After the last step: agreement on how it went, the last checkpoint,
  // --save-weights, the final evaluation, the profile and the summary.
  StatusOr<TrainResult> FinishRun(RunState& run, Allocator& memory);
  StatusOr<double> Evaluate();
  // --save-weights, on every rank (a collective where ZeRO shards the
  // master weights); a failure on any rank ends every rank.
  Status SaveWeights();
  // Rank 0, after the final evaluation of question answering features:
  // --predictions-file's spans, and --squad-eval-file's EM and F1 into `end`.
  Status ReportAnswerSpans(RunEnd* end);
  // DDP_TEST_STATE_DIGEST: this rank's hash of master weights and
  // optimizer state, and its loss scale, printed after each step.
  void PrintStateDigest(int64_t step);

  TrainOptions options_;
  FaultInjection faults_;
  // The data plane's communicator, counting what this rank sends (null: one rank).
  std::unique_ptr<CountingCommunicator> counting_;
  Communicator* comm_;
  RankInfo ranks_;
  ExecutionContext ctx_;
  RunTimeline timeline_;  // --timeline
  ProgressPrinter progress_{0, false};  // rank 0's step lines
  std::string eval_label_ = "accuracy";  // the model's first evaluation count, for people
  Tensor eval_outputs_;  // the last evaluation's per-sample results (question answering: best spans)
  ContentionProbe* probe_ = nullptr;     // --contention-probe
  cuda::IntervalTimer compute_timer_;  // GPU: a step's compute, from start to its last gradient
  // After what they use (the context, the progress printer).
  TrainComponents parts_;
};

}  // namespace ddp
