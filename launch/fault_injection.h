// Test hooks, from the environment only (never flags, never set in a real
// run): each DDP_TEST_* variable makes one rank misbehave at one point, so
// the fault tests can check that the job still ends with one clear line.
// Read once at start-up; the trainer asks at a few fixed points.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/batch_source.h"
#include "runtime/execution_context.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

struct FaultInjection {
  // DDP_TEST_INJECT_NONFINITE_GRAD "STEP:RANK": rank RANK's gradient turns
  // non-finite at 1-based step STEP, after reduction (only that rank sees it).
  int64_t nonfinite_step = 0;
  int nonfinite_rank = -1;
  // DDP_TEST_STATE_DIGEST=1: each rank prints a hash of its master weights
  // and optimizer state, and its loss scale, after every step.
  bool print_state_digest = false;
  // DDP_TEST_CHECKPOINT_CRASH "POINT[:RANK[:STEP]]": the checkpoint writer
  // kills its process at POINT (launch/checkpointer.h).
  std::string checkpoint_crash;
  // DDP_TEST_STOP_IN_BACKWARD "RANK:STEP": the rank stops itself (SIGSTOP)
  // between forward and backward of step STEP, leaving its peers in the
  // step's collectives.
  int stop_in_backward_rank = -1;
  int64_t stop_in_backward_step = 0;
  // DDP_TEST_THROW "RANK:STEP": the rank throws an InputError nothing
  // catches at step STEP (a corrupt sample it cannot skip).
  int throw_rank = -1;
  int64_t throw_step = 0;
  // DDP_TEST_BUSY_GPU "RANK:STEP": the rank's compute stream is kept busy
  // for --comm-timeout-s + 4 s after the forward of step STEP, so NCCL's
  // wait watchdog must end the process.
  int busy_gpu_rank = -1;
  int64_t busy_gpu_step = 0;
  // DDP_TEST_SLOW_LOADER_MS "N": every training batch takes N ms longer.
  int slow_loader_ms = 0;
  // DDP_TEST_SLOW_RANK "RANK:MS": the rank sleeps MS ms in each step's
  // first forward (a straggler).
  int slow_rank = -1;
  int64_t slow_rank_ms = 0;
  // DDP_TEST_STOP_AT_END "RANK": the rank stops itself once its run is
  // over, before MPI's end, leaving its peers in MPI_Finalize.
  int stop_at_end_rank = -1;

  // The variables of this process's environment; a malformed one is an
  // error naming it.
  static StatusOr<FaultInjection> FromEnvironment();

  // Between the forward and the backward of micro-batch `micro` of
  // 1-based `step`, on `rank`: stops, keeps the GPU busy, sleeps or throws
  // as asked (a batch whose first sample is `first_sample`).
  void BetweenForwardAndBackward(int64_t step, int64_t micro, int rank, ExecutionContext& ctx, int64_t first_sample,
                                 double comm_timeout_s) const;
  // Whether `rank`'s gradients are to turn non-finite at 1-based `step`.
  bool NonfiniteGradientAt(int64_t step, int rank) const { return step == nonfinite_step && rank == nonfinite_rank; }
  // Where they are: the first element of the first non-empty gradient
  // (an empty ZeRO piece aside) becomes infinite.
  void PoisonGradients(int64_t step, int rank, const std::vector<Tensor>& held) const;
  // `data`, slowed as DDP_TEST_SLOW_LOADER_MS asks (or as it is).
  std::unique_ptr<BatchSource> SlowLoader(std::unique_ptr<BatchSource> data) const;
  // Once the run is over, before MPI's end.
  void AtEnd(int rank) const;
};

// DDP_TEST_STATE_DIGEST's lines, an FNV-1a hash over tensors' bytes
// (copied to the host), so tests compare ranks and runs bit for bit:
// "state digest: rank R step S HASH scale X optimizer steps N" after each
// step (the master weights this rank holds, the optimizer state and step
// count), and "eval digest: rank R step N buffers HASH parameters HASH"
// before each evaluation.
void PrintStateDigest(int rank, int64_t step, const std::vector<Tensor>& master_weights,
                      const std::vector<Tensor>& optimizer_state, int64_t optimizer_steps, double loss_scale);
void PrintEvalDigest(int rank, int64_t optimizer_steps, const std::vector<Tensor>& buffers, const Tensor& parameters);

}  // namespace ddp
