// The contention probe: how much CPU ranks' compute and collectives slow
// each other when they run at once (the scaling model's compute_slowdown
// and comm_slowdown, comm/scaling_model.h).
//
// Every rank trains on its own (a job of one rank each, no reducer) while
// this probe owns a communicator over all of them, in the same process, as
// DDP's collectives are: a thread of the rank beside its compute, driven the
// same way (comm/mpi_communicator.h). What is loaded is what DDP overlaps:
// the (last) backward, not the forward, which can differ in how much the
// collectives slow it (their memory traffic against its own). Timed steps
// alternate, so the box's drift between minutes falls on both sides alike:
//   - loaded: the ranks meet at the step's start; from its backward's start
//     each rank all-reduces a buffer back to back with the others until
//     every rank's backward is done. Backward time is the loaded figure;
//     each collective that ran wholly inside every rank's backward is a
//     loaded collective time.
//   - quiet: backward alone, then, with the step done, the same all-reduce
//     alone a few times: the quiet figures of both.
// The slowdowns are the ratios of the medians (each rank's, averaged over
// ranks) minus one. A flag in the buffer's first element tells every rank
// when all ranks' compute is done, so all issue the same collectives.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "runtime/status.h"

namespace ddp {

struct ContentionResult {
  int ranks = 0;
  int64_t bytes = 0;                      // of each all-reduce
  int64_t loaded_steps = 0, quiet_steps = 0;  // per rank
  int64_t loaded_collectives = 0, quiet_collectives = 0;  // summed over ranks
  // Medians over each rank's steps or collectives, averaged over ranks;
  // compute is the backward.
  double compute_quiet_s = 0.0, compute_loaded_s = 0.0;
  double collective_quiet_s = 0.0, collective_loaded_s = 0.0;
  // The first quiet all-reduce of a step, on a link idle since the last.
  double collective_cold_s = 0.0;
  double compute_slowdown() const { return compute_loaded_s / compute_quiet_s - 1.0; }
  double comm_slowdown() const { return collective_loaded_s / collective_quiet_s - 1.0; }
};

// The file --contention-probe writes: every field above, the two
// slowdowns, and `model` (what trained).
std::string ContentionResultJson(const ContentionResult& result, const std::string& model);

class ContentionProbe {
 public:
  // `comm` spans every rank and carries nothing else while the probe runs.
  ContentionProbe(Communicator* comm, int64_t bytes);
  ~ContentionProbe();
  ContentionProbe(const ContentionProbe&) = delete;
  ContentionProbe& operator=(const ContentionProbe&) = delete;

  // Before a step's work and after it; every rank calls both, step by
  // step. Untimed (warm-up) steps carry no load and count for nothing.
  // `backward_s`: the step's (last) backward, as the trainer timed it.
  Status StepStarting(bool timed);
  Status StepFinished(double backward_s);
  // Around the step's last backward (the one DDP overlaps): the load runs
  // from the first call until the second on every rank.
  void BackwardStarted();
  void BackwardFinished();
  // A collective: every rank's figures, averaged. Fails on every rank when
  // some rank saw no loaded step or no collective wholly inside backward
  // (a backward shorter than one all-reduce: a smaller buffer would do).
  StatusOr<ContentionResult> Finish();

  static constexpr int kQuietCollectives = 3;

 private:
  void LoadLoop();
  Status Meet();  // a small all-reduce every rank waits for

  Communicator* comm_;
  Tensor buffer_;
  int64_t timed_steps_ = 0;
  bool loaded_ = false, timed_ = false;
  std::atomic<bool> computing_{false};
  std::thread load_;
  Status load_status_;
  std::vector<double> compute_quiet_, compute_loaded_, collective_quiet_, collective_loaded_, collective_cold_;
};

}  // namespace ddp
