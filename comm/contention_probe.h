// The contention probe: how much CPU ranks' compute and collectives slow
// each other when they run at once (the scaling model's compute_slowdown
// and comm_slowdown, and each collective's fixed cost to both,
// comm/scaling_model.h).
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
//     loaded collective time, and the collectives started during backward
//     are counted. Loaded steps alternate two sizes, the large and a
//     quarter of it: the smaller one starts more collectives in a backward,
//     which separates a fixed cost a collective from a slowdown per byte
//     (FitContention).
//   - quiet: backward alone, then, with the step done, each size's
//     all-reduce alone a few times: the quiet figures.
// Each figure is the median over a rank's steps or collectives, averaged
// over ranks. A flag in the buffer's first element tells every rank when
// all ranks' compute is done, so all issue the same collectives.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/scaling_model.h"
#include "runtime/status.h"

namespace ddp {

struct ContentionResult {
  int ranks = 0;
  int64_t loaded_steps = 0, quiet_steps = 0;              // per rank, both sizes' loaded steps
  int64_t loaded_collectives = 0, quiet_collectives = 0;  // summed over ranks and sizes
  double compute_quiet_s = 0.0;  // backward alone
  // Each size's load: its bytes, backward beside it, collectives started
  // per backward, one all-reduce alone and beside backward. small.bytes 0:
  // one size only.
  ContentionLoad large, small;
  // The first quiet all-reduce of the large size in a step, on a link idle
  // since the last.
  double collective_cold_s = 0.0;
  Contention fitted;  // FitContention over both loads
};

// The file --contention-probe writes: every field above, and `model` (what
// trained).
std::string ContentionResultJson(const ContentionResult& result, const std::string& model);

class ContentionProbe {
 public:
  // `comm` spans every rank and carries nothing else while the probe runs.
  // Loads of `bytes` and of `small_bytes` (0: only the one size).
  ContentionProbe(Communicator* comm, int64_t bytes, int64_t small_bytes);
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
  // some rank saw no loaded step of a size or no collective of it wholly
  // inside backward (a backward shorter than one all-reduce: a smaller
  // buffer would do).
  StatusOr<ContentionResult> Finish();

  static constexpr int kQuietCollectives = 3;

 private:
  // What one load size gathers on this rank.
  struct Size {
    Tensor buffer;
    std::vector<double> backward_loaded, collectives, collective_quiet, collective_loaded;
  };
  void LoadLoop(Size* size);
  Status Meet();  // a small all-reduce every rank waits for

  Communicator* comm_;
  std::vector<Size> sizes_;  // the large, then the small if any
  int64_t timed_steps_ = 0;
  Size* loaded_ = nullptr;   // this step's load, if it is a loaded step
  bool timed_ = false;
  std::atomic<bool> computing_{false};
  std::atomic<int64_t> started_{0};  // this step's collectives started during backward
  std::thread load_;
  Status load_status_;
  std::vector<double> compute_quiet_, collective_cold_;
};

}  // namespace ddp
