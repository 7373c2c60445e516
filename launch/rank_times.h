// Stragglers: each rank's median compute time and collective wait over the
// timed steps, gathered in rank order; their spread for the summary; and a
// warning naming a rank whose compute holds the others back (in
// synchronous data parallelism every rank waits for the slowest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "runtime/status.h"

namespace ddp {

// Every rank's figures, in rank order; -1 where a rank knows none.
struct RankTimes {
  std::vector<double> compute, wait;   // medians over the timed steps
  std::vector<double> compute_quarter;  // the compute's 25th percentile
  int64_t samples = 0;                  // timed steps each rank measured
};

// Collective over `comm` (null: one rank): this rank's per-step compute and
// wait times, reduced to medians, gathered from every rank.
StatusOr<RankTimes> GatherRankTimes(Communicator* comm, const std::vector<double>& compute,
                                    const std::vector<double>& wait);

// {min, median, max, slowest_rank, by_rank} over the known (>= 0) values.
nlohmann::ordered_json Spread(const std::vector<double>& by_rank);

// One warning line a straggler: a rank whose median compute is more than
// 10% above the other ranks' median and whose 25th percentile is above it
// too (one noisy stretch on a shared CPU is no straggler); none before 5
// timed steps.
std::vector<std::string> StragglerWarnings(const RankTimes& times);

}  // namespace ddp
