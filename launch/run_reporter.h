// The run's summary: one record, filled once by the trainer, rendered as
// the metrics file's last JSON line, as TensorBoard scalars and as the
// text lines rank 0 prints. Keys and lines are the command-line contract
// (DESIGN.md: the metrics file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/traffic.h"

namespace ddp {

// Rank 0's memory, in bytes.
struct MemoryFigures {
  int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  int64_t transient_bucket_bytes = 0;  // ZeRO-2 and 3's pool of gradient bucket buffers
  int64_t activation_peak_bytes = 0;   // the allocator's peak during training, less the persistent bytes
  int64_t peak_bytes = 0;              // the allocator's peak, setup included
  int64_t allocated_bytes = 0, reserved_bytes = 0;
  int64_t peak_resident_bytes = 0;  // the process's peak resident set
  int64_t low_precision_bytes = 0;  // the 16-bit weight copy (--precision bf16, fp16)
  int64_t buffer_bytes = 0;         // the model's buffers (batch norm's running statistics)
  int64_t workspace_bytes = 0;      // the ops' scratch slots: staging buffers, library workspaces
  int64_t gathered_parameter_peak_bytes = 0;  // ZeRO-3: the most gathered parameter buckets held at once
  // ZeRO-2 and 3: the largest gradient of a parameter split across
  // buckets, held whole while backward writes it and its buckets are reduced.
  int64_t split_gradient_peak_bytes = 0;
  int64_t setup_peak_bytes = 0;  // the allocator's peak before the first step (the planner's)
};

struct RunSummary {
  std::string model, device, precision, compute_dtype, memory_format;
  int world_size = 1;
  int64_t batch_size = 0, accumulation_steps = 1;
  int zero_stage = 0;
  int64_t steps = 0;        // the last step trained (the step a preemption stopped after)
  int64_t total_steps = 0;  // the steps the run was to train
  int64_t warmup_steps = 0;
  double samples_per_s = 0.0, final_loss = 0.0;
  const char* noun = "samples";  // "images", "sequences"
  // Gradients went through a communicator; its exposed communication a
  // timed step (eager steps only: a replayed graph has no bucket timings).
  bool distributed = false;
  double bucket_mb = 0.0;
  std::optional<double> exposed_comm_s;
  Traffic traffic_per_step;  // what rank 0 sent a timed step, by collective (distributed runs)
  std::optional<int64_t> cuda_graph_captures;  // --cuda-graphs
  std::optional<std::string> zero_gather_dtype;
  // Dynamic loss scaling: the final scale and the steps skipped.
  bool loss_scaling = false;
  double loss_scale = 1.0;
  int64_t skipped_steps = 0;
  double max_skipped_share = 0.05;  // --max-skipped-share: warn above it
  std::optional<int64_t> preempted_at_step;
  // Every rank's median compute and collective wait (rank_times.h's
  // Spread of each).
  nlohmann::ordered_json compute_s, comm_wait_s;
  nlohmann::ordered_json gpu_health;  // null: not a GPU run
  double input_wait_s = 0.0, input_wait_share = 0.0;  // per timed step; share of step time
  int loader_threads = 0;
  bool reads_files = false;  // the input decodes files: its wait is worth a word
  int64_t replaced_samples = 0;
  std::optional<double> eval_accuracy;  // the model's first count
  std::string eval_label = "accuracy";
  std::optional<double> squad_exact_match, squad_f1;  // percentages
  int64_t seq_len = 0;  // token data: tokens_per_s counts padding, real_tokens_per_s not
  double real_tokens_per_s = 0.0;
  MemoryFigures memory;
};

// The run's first line: "ddp_train: resnet50, 25557032 parameters, 2 ranks
// x 1 threads on cpu, batch 8 x 1 micro-batches per rank, 100 steps, sgd lr
// 0.0625, 224x224 images from synthetic".
struct RunStart {
  std::string model, device, optimizer, data;  // data: the source's description
  int64_t parameters = 0, batch_size = 0, accumulation_steps = 1, steps = 0;
  int world_size = 1, threads = 1;
  double lr = 0.0;
};
std::string StartLine(const RunStart& r);

// One step's record: the metrics file's line, TensorBoard's scalars and
// rank 0's progress line.
struct StepRecord {
  int64_t step = 0, total_steps = 0;  // 1-based
  double loss = 0.0, lr = 0.0, seconds = 0.0;
  int64_t samples_per_step = 0;
  const char* noun = "samples";
  int64_t seq_len = 0, tokens = 0;  // token data: positions a sample, and the step's real tokens
  bool loss_scaling = false;
  double loss_scale = 1.0;
  bool skipped = false;  // non-finite gradients: no update
  bool graphed = false;  // replayed from a CUDA graph
  double input_wait_s = 0.0;
  int64_t replaced_samples = 0;
  std::optional<int64_t> checkpoint_committed;  // the step whose checkpoint rank 0 committed
  std::optional<double> checkpoint_stall_s;     // a checkpoint began after this step
  // Gradients went through a communicator: the step's exposed
  // communication and each bucket's launch, finish and wait (none for a
  // replayed graph).
  bool distributed = false;
  double exposed_comm_s = 0.0;
  struct Bucket {
    double launched_s, finished_s, waited_s;
  };
  std::vector<Bucket> buckets;
  std::optional<double> eval_accuracy;
  std::string eval_label = "accuracy";
  std::optional<double> eta_s;  // the time left, at the run's pace so far
};

nlohmann::ordered_json StepJson(const StepRecord& r);
// A record's numbers as TensorBoard scalars: "train/loss", ...,
// "eval/accuracy".
std::vector<std::pair<std::string, double>> RecordScalars(const nlohmann::ordered_json& record);
// "step    12/100  loss 2.3456  lr 0.10000  0.512 s  15.6 images/s ...".
std::string StepLine(const StepRecord& r);

// {"model": ..., ..., "memory": {...}}: the metrics file's summary record.
nlohmann::ordered_json SummaryJson(const RunSummary& s);
// summary/samples_per_s, eval/accuracy and memory/*: TensorBoard's.
std::vector<std::pair<std::string, double>> SummaryScalars(const RunSummary& s);
// "summary: ...", "memory (rank 0): ..." and, past --max-skipped-share,
// the skipped steps' warning: each ending in a newline.
std::string SummaryText(const RunSummary& s);

// The run's figures over its timed steps: the first `warmup` steps of the
// run (allocation, algorithm search, a CUDA graph's capture) are untimed.
class RunMeter {
 public:
  explicit RunMeter(int64_t warmup) : warmup_(warmup) {}
  int64_t warmup() const { return warmup_; }
  // Whether the run's `index`th step (0 for the first it trains) is timed.
  bool timed(int64_t index) const { return index >= warmup_; }
  // One step: its wall time, exposed communication, real tokens, input
  // wait, this rank's compute time (-1: unknown) and collective wait, and
  // the samples it replaced and whether it was skipped (every step).
  void AddStep(int64_t index, double seconds, double exposed_s, int64_t tokens, double input_wait_s,
               double compute_s, double comm_wait_s, int64_t replaced, bool skipped);
  // A checkpoint's stall after step `index`: throughput counts it.
  void AddStall(int64_t index, double seconds);
  // What this rank sent over the timed steps, for the summary's mean.
  void SetTimedTraffic(const Traffic& sent) { traffic_ = sent; }
  // Once a run, where waiting for input took more than 5% of the timed
  // steps' time (over five of them at least, or the whole run): the line.
  std::optional<std::string> InputWaitWarning(bool last_step, int loader_threads, int prefetch);
  // The summary's figures of a run that trained `steps` steps of
  // `samples_per_step` samples: throughput, exposed communication (where
  // `exposed` is known), input wait, real tokens/s, replaced and skipped.
  void Fill(int64_t steps, int64_t samples_per_step, bool exposed, RunSummary* summary) const;
  const std::vector<double>& compute_times() const { return compute_times_; }
  const std::vector<double>& wait_times() const { return wait_times_; }

 private:
  int64_t warmup_;
  double seconds_ = 0.0, exposed_ = 0.0, input_wait_ = 0.0;
  int64_t tokens_ = 0, count_ = 0, replaced_ = 0, skipped_ = 0;
  Traffic traffic_;
  bool warned_input_ = false;
  std::vector<double> compute_times_, wait_times_;  // this rank's, per timed step
};

}  // namespace ddp
