// --timeline FILE: a Chrome-trace (Perfetto) timeline of the steps
// --timeline-steps A:B on every rank, written by rank 0. Each rank's clock
// is measured against rank 0's at start (median of 5 barrier rounds), each
// rank's events (runtime/timeline.h, and each bucket's collective) are
// shifted onto rank 0's clock and gathered at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "runtime/execution_context.h"
#include "runtime/status.h"

namespace ddp {

struct RunTimelineOptions {
  std::string path;             // --timeline
  int64_t first_step = 1;       // --timeline-steps A:B
  int64_t last_step = 1;
  int rank = 0, world_size = 1;
};

class RunTimeline {
 public:
  explicit RunTimeline(RunTimelineOptions options) : options_(std::move(options)) {}
  bool enabled() const { return !options_.path.empty(); }
  // Collective over `comm` (null: one rank): the clocks compared; events
  // recorded from here on, GPU ranks' on `ctx`'s stream.
  Status Start(Communicator* comm, const ExecutionContext& ctx);
  // Each bucket's collective of a step as an event (`kind`: "all-reduce"
  // or "reduce-scatter").
  static void AddBucketEvents(const ReduceStats& stats, const char* kind);
  // Collective: every rank's events gathered; rank 0 writes the file and
  // says where (the last step recorded: the run's `last_run_step` at most).
  Status Write(Communicator* comm, int64_t last_run_step);

 private:
  RunTimelineOptions options_;
  std::vector<double> offsets_;  // each rank's clock minus rank 0's, seconds
  double zero_ = 0.0;            // rank 0's clock at the start
};

}  // namespace ddp
