// Process bootstrap: MPI start-up (mpirun, srun --mpi=pmix, or a singleton),
// rank discovery, and the cross-rank agreements that turn would-be hangs
// into one clear error line on every rank.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/status.h"

namespace ddp {

struct RankInfo {
  int rank = 0, world_size = 1;
  // Position among the ranks sharing this node (an MPI shared-memory split).
  int local_rank = 0, local_size = 1;
};

// Owns MPI for the process: MPI_Init_thread(MPI_THREAD_MULTIPLE) on
// creation, MPI_Finalize on destruction. Every blocking MPI call here and
// below (start, agreements, end) runs under the CollectiveWatchdog, which
// the program starts before this: a peer that stops answering at any point
// ends the job after --comm-timeout-s instead of hanging it.
class MpiRuntime {
 public:
  static StatusOr<std::unique_ptr<MpiRuntime>> Init(int* argc, char*** argv);
  ~MpiRuntime();
  const RankInfo& info() const { return info_; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }
  // The ranks sharing this node (an MPI shared-memory split), by local rank.
  MPI_Comm node() const { return node_; }

 private:
  MpiRuntime() = default;
  RankInfo info_;
  MPI_Comm node_ = MPI_COMM_NULL;
};

// Collective: every rank's `mine`, in rank order of `comm`. `what` names
// the values in the watchdog's line ("the ranks' --batch-size").
StatusOr<std::vector<std::string>> AllGatherStrings(MPI_Comm comm, const std::string& mine, const std::string& what);

// Every rank must hold equal values for each (name, value) setting. On a
// mismatch every rank gets the same InvalidArgument naming the first setting
// that differs and two ranks' values, e.g. "ranks disagree on --batch-size:
// rank 0 has 8, rank 1 has 4".
Status CheckRanksAgree(MPI_Comm comm, const std::vector<std::pair<std::string, std::string>>& settings);

// Collective: if any rank's `local` is an error, every rank returns an error
// (its own, or "rank R failed: <R's message>" from the lowest failing rank),
// so no rank goes on to a collective the others will never join.
Status AgreeOnStatus(MPI_Comm comm, const Status& local);

}  // namespace ddp
