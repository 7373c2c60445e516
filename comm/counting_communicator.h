// A Communicator that counts what its rank sends (comm/traffic.h) for
// every collective it passes on to another. The trainer wraps the data
// plane's communicator in one, so each step's record and the summary say
// the bytes of all-reduce, reduce-scatter, all-gather and broadcast.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/traffic.h"

namespace ddp {

class CountingCommunicator final : public Communicator {
 public:
  // `inner` outlives this.
  explicit CountingCommunicator(Communicator* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override;
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override;
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override;
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override;
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> Barrier() override { return inner_->Barrier(); }

  // Everything counted since construction.
  Traffic sent() const;
  // Off: collectives pass uncounted (what runs between steps: evaluation,
  // checkpoints, the run's end), so a step's share is a difference.
  void set_counting(bool on) { counting_ = on; }
  // What a replayed CUDA graph sent: its collectives never pass through
  // here.
  void AddReplayed(const Traffic& t);

 private:
  void Count(std::atomic<int64_t>& kind, int64_t bytes, bool all_reduce = false);

  Communicator* inner_;
  std::atomic<bool> counting_{true};
  // Collectives start from the compute thread and from hooks inside
  // backward: counted atomically.
  std::atomic<int64_t> all_reduce_{0}, reduce_scatter_{0}, all_gather_{0}, broadcast_{0};
};

}  // namespace ddp
