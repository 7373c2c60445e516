// --comm mpi on GPUs: an MPI communicator's collectives on CUDA tensors,
// staged through pinned host memory. Each call copies its device tensors
// into page-locked buffers on the compute stream and waits for that copy
// (the host blocks until the GPU has produced the bucket), then runs the
// MPI collective on the host copies on MPI's communication thread;
// Wait() waits for MPI and enqueues the copies back on the compute stream,
// so the optimizer and everything after it see the results in order.
// Aliasing is kept: a tensor inside another of the call (an in-place
// reduce-scatter's output, an in-place all-gather's input) is a view of the
// other's staging buffer. Host tensors pass straight through.
//
// This is how data parallelism runs on one GPU (NCCL refuses two ranks on
// one device) and over networks NCCL cannot use; it is slower than NCCL, as
// every bucket crosses PCIe twice and backward waits for each copy out.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace ddp {

class StagedCommunicator final : public Communicator {
 public:
  // `host` runs the collectives (an MpiCommunicator); `compute_stream` is the
  // rank's compute stream on CUDA device `device`.
  StagedCommunicator(std::unique_ptr<Communicator> host, int device, void* compute_stream);
  ~StagedCommunicator() override;

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override;
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override;
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override;
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override;
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> Barrier() override { return host_->Barrier(); }

 private:
  struct Staging;
  // Stages `tensors` (host copies in the same order), runs `run` on them,
  // and copies back those marked in `outputs` when the Work is waited on.
  template <typename Run>
  std::shared_ptr<Work> Staged(const std::vector<Tensor>& tensors, const std::vector<bool>& outputs, Run run);

  std::unique_ptr<Communicator> host_;
  int device_;
  void* compute_;
  void* copied_;  // event: the copies out have finished
};

}  // namespace ddp
