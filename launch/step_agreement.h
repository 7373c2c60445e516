// What the ranks decide together, never from one rank's view (DESIGN.md:
// "Agreement"): each step's votes travel in one all-reduce, so every rank
// issues the same collectives in the same order, and no rank stops, skips
// a step or commits a checkpoint alone.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "runtime/status.h"

namespace ddp {

// One rank's votes for a step, or (after SumStepVotes) every rank's
// summed: a flag is 0 or 1 on one rank and a count of ranks after the sum.
struct StepVotes {
  double loss = 0.0;               // the rank's mean micro-batch loss
  int64_t failed = 0;              // the rank hit an error this step
  int64_t nonfinite = 0;           // the rank holds a non-finite gradient
  int64_t tokens = 0;              // non-padding tokens of the rank's step
  int64_t checkpoint_durable = 0;  // the pending checkpoint's files are durable on the rank
  int64_t checkpoint_failed = 0;   // the rank's checkpoint write failed
  int64_t stop = 0;                // the rank received SIGUSR1 or SIGTERM
  double input_wait_s = 0.0;       // the rank's wait for input
  int64_t replaced_samples = 0;    // samples whose file would not decode, replaced
};

// Applies f to each vote of v, in one fixed order: the wire format of
// SumStepVotes (every count travels as a double, exact below 2^53).
template <typename Votes, typename F>
void ForEachVote(Votes& v, F&& f) {
  f(v.loss);
  f(v.failed);
  f(v.nonfinite);
  f(v.tokens);
  f(v.checkpoint_durable);
  f(v.checkpoint_failed);
  f(v.stop);
  f(v.input_wait_s);
  f(v.replaced_samples);
}

// Collective: every rank's votes summed, in one all-reduce on `comm`
// (labelled for the watchdog's line). Null `comm` (one rank): `mine`.
StatusOr<StepVotes> SumStepVotes(Communicator* comm, const StepVotes& mine);

// Collective: `local` if this rank failed; else, if another rank did,
// FailedPrecondition(if_another_failed); else Ok. One all-reduce on
// `comm`; null `comm` (one rank): `local`. comm/bootstrap.h's
// AgreeOnStatus does the same over MPI before any Communicator exists.
Status AgreeOnStatus(Communicator* comm, const Status& local, const std::string& if_another_failed);

}  // namespace ddp
