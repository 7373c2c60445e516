// The run's summary record (launch/run_reporter.h renders it), assembled
// from its parts at the end: what ran, what it achieved over the timed
// steps, every rank's step times, and rank 0's memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/bootstrap.h"
#include "launch/rank_times.h"
#include "launch/run_reporter.h"
#include "launch/train_components.h"
#include "launch/train_options.h"
#include "runtime/allocator.h"

namespace ddp {

// How the run ended.
struct RunEnd {
  int64_t steps = 0;       // the last step trained
  bool preempted = false;  // stopped by SIGUSR1 or SIGTERM after `steps`
  bool distributed = false;  // gradients went through a communicator
  double final_loss = 0.0;
  std::optional<double> eval_accuracy;  // the final evaluation's (not after a preemption)
  std::string eval_label = "accuracy";
  // --squad-eval-file: SQuAD's exact match and F1 of the final evaluation.
  std::optional<double> squad_exact_match, squad_f1;
};

// Rank 0's memory: its parts' persistent bytes and the allocator's
// figures. `persistent` and `setup_peak` were read as training began (the
// bytes then in use, and the setup's peak), and the peak reset.
MemoryFigures MeasureMemory(const TrainComponents& parts, const ExecutionContext& ctx, Allocator& memory,
                            int64_t persistent, int64_t setup_peak);

RunSummary Summarize(const TrainOptions& options, const RankInfo& ranks, const TrainComponents& parts,
                     const RunMeter& meter, const RankTimes& times, const RunEnd& end, const MemoryFigures& memory);

}  // namespace ddp
