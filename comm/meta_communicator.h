// The meta device's communicator (--device meta: planning one rank's
// memory): rank `rank` of `world` ranks that never meet. Every collective
// checks its shapes as a real backend does and completes at once, moving
// nothing; the reducers and ZeRO above it allocate their buckets, shards
// and gather buffers for that world size exactly as in training.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace ddp {

class MetaCommunicator final : public Communicator {
 public:
  MetaCommunicator(int rank, int world);
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override;
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override;
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override;
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override;
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> Barrier() override;

 private:
  int rank_, world_;
};

}  // namespace ddp
