// The meta device's communicator (--device meta: planning one rank's
// memory): rank `rank` of `world` ranks that never meet. Every collective
// checks its shapes as a real backend does and completes at once, moving
// nothing; the reducers and ZeRO above it allocate their buckets, shards
// and gather buffers for that world size exactly as in training.
//
// What the planned backend itself allocates for a collective (MPI's
// receive buffer on CPU ranks; NCCL's live outside the allocator) comes
// from `scratch_bytes`, and is kept as that backend keeps it: the largest
// so far, from the first collective that needs it on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace ddp {

class MetaCommunicator final : public Communicator {
 public:
  // The bytes a backend allocates for one collective: `op` ("all-reduce",
  // "reduce-scatter", "all-gather"), its input and output.
  using ScratchBytes = std::function<int64_t(const char* op, const Tensor& input, const Tensor& output)>;
  MetaCommunicator(int rank, int world, ScratchBytes scratch_bytes = nullptr);
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override;
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override;
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override;
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override;
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> Barrier() override;
  // What the planned backend keeps for its collectives now.
  int64_t scratch_bytes() const { return scratch_.defined() ? static_cast<int64_t>(scratch_.nbytes()) : 0; }

 private:
  // The collective's scratch, grown where it needs more.
  std::shared_ptr<Work> Start(const char* op, const Tensor& input, const Tensor& output);

  int rank_, world_;
  ScratchBytes scratch_bytes_;
  Tensor scratch_;
};

}  // namespace ddp
