// The collective watchdog (PyTorch's ProcessGroupNCCL has one): a rank
// whose peer died, or stopped answering (SIGSTOP, a hung driver, a dead
// node), would wait in its collective forever. Each collective registers
// while it runs; a thread checks every half second, and one that has not
// finished within the timeout (--comm-timeout-s) gets one line naming it
// (what it was, the bucket, the step) and ends the job: on_timeout aborts
// (AbortJob: MPI_Abort makes mpirun or srun end every rank).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ddp {

class CollectiveWatchdog {
 public:
  // Process-wide; timeout_s <= 0 leaves it off. `on_timeout` runs on the
  // watchdog's thread with the line to print, and must not return.
  static void Start(double timeout_s, std::function<void(const std::string&)> on_timeout);
  static void Stop();
  // Where the run is, for the line: "step 12".
  static void SetPhase(const std::string& phase);
  // An unrecoverable failure of a collective on this rank (its peers may be
  // waiting inside it): the same end as a timeout, with `line`. Returns
  // only when the watchdog is not running (one rank).
  static void EndJob(const std::string& line);

  // An operation that must finish within the timeout, registered between
  // Begin and End.
  static int64_t Begin(const std::string& what);
  static void End(int64_t id);

  // Begin .. End for a scope.
  class Scope {
   public:
    explicit Scope(const std::string& what) : id_(Begin(what)) {}
    ~Scope() { End(id_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int64_t id_;
  };
};

// What the collectives this thread issues are, while the object lives
// ("all-reduce of bucket 3"): communicators take it into the watchdog's
// line. Nested labels replace the outer one.
class CollectiveLabel {
 public:
  explicit CollectiveLabel(std::string label);
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;

 private:
  std::string previous_;
};
// This thread's current label, or "" outside any.
const std::string& CurrentCollectiveLabel();

}  // namespace ddp
