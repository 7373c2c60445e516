// The MPI backend for host tensors. One communication thread owns every MPI
// call and runs collectives in FIFO order, so they progress while compute
// runs. It drives nonblocking collectives with MPI_Test and backs off
// (yield, then short sleeps) while a collective is in flight: Open MPI's
// blocking calls busy-spin, and a spinning thread takes a core from compute.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/communicator.h"

namespace ddp {

// Ends the whole job from any thread, after the caller printed its line:
// MPI_Abort where MPI runs at MPI_THREAD_MULTIPLE (Open MPI's default here),
// which mpirun and srun turn into the end of every rank. Below that level
// another thread may be inside MPI, where MPI_Abort from this one is not
// allowed: only this process ends (std::_Exit), which mpirun also turns into
// the job's end, and which under srun leaves the peers' collectives
// unanswered until their watchdogs end them.
// Inside MPI_Init_thread or MPI_Finalize (kStarting, kEnding), MPI_Abort,
// and even MPI_Initialized, may block on the lock those calls hold: there
// only this process ends. MpiRuntime moves the phase; kUnknown (a program
// that starts MPI itself) asks MPI as before.
[[noreturn]] void AbortJob();
enum class MpiPhase { kUnknown, kStarting, kUp, kEnding };
void SetMpiPhase(MpiPhase phase);

// The receive buffer one collective of rank `rank` of `world` needs (`op`
// as MetaCommunicator names it): a large all-reduce's copies of the rank's
// block, a reduce-scatter's incoming block. The worker keeps the largest
// so far from one collective to the next; so does the memory planner's
// meta communicator.
int64_t MpiScratchBytes(const char* op, const Tensor& input, const Tensor& output, int rank, int world);

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm`, so its traffic never mixes with other MPI use. MPI
  // must have been initialized with MPI_THREAD_MULTIPLE or SERIALIZED.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override;
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override;
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override;
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override;
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> Barrier() override;

  class MpiWork;

 private:
  struct Task;
  // `op` and `bytes` describe the collective to the watchdog (unless the
  // caller set a CollectiveLabel).
  std::shared_ptr<Work> Enqueue(const char* op, size_t bytes, std::function<Status()> run);
  void Loop();

  MPI_Comm comm_;
  int rank_ = 0, world_size_ = 1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Task>> queue_;
  bool stop_ = false;
  std::thread thread_;
  Tensor scratch_;  // the worker's receive buffer (GrownScratch), only it touches
  int64_t tasks_run_ = 0, stop_at_task_ = -1;  // the DDP_TEST_STOP_IN_COLLECTIVE hook
  // The first failure, which every later task reports instead of running:
  // a cancelled transfer leaves the ranks' message matching out of step,
  // and a later collective could receive a peer's stale message as its own.
  Status failed_;
};

// The text of an MPI error code.
std::string MpiErrorString(int code);

}  // namespace ddp
