#include "comm/meta_communicator.h"

#include <glog/logging.h>

namespace ddp {
namespace {

class DoneWork final : public Work {
 public:
  Status Wait() override { return Status::Ok(); }
  bool IsCompleted() override { return true; }
  WorkTiming timing() const override { return {}; }
};

std::shared_ptr<Work> Done() { return std::make_shared<DoneWork>(); }

void CheckDefined(const Tensor& t, const char* op) { CHECK(t.defined()) << op << " of an undefined tensor"; }

}  // namespace

MetaCommunicator::MetaCommunicator(int rank, int world, ScratchBytes scratch_bytes)
    : rank_(rank), world_(world), scratch_bytes_(std::move(scratch_bytes)) {
  CHECK(world >= 1 && rank >= 0 && rank < world) << "meta communicator: rank " << rank << " of " << world;
}

std::shared_ptr<Work> MetaCommunicator::Start(const char* op, const Tensor& input, const Tensor& output) {
  const int64_t bytes = scratch_bytes_ ? scratch_bytes_(op, input, output) : 0;
  if (bytes > 0) GrowReceiveBuffer(scratch_, bytes, Device::Meta());
  return Done();
}

std::shared_ptr<Work> MetaCommunicator::AllReduce(Tensor tensor, ReduceOp) {
  CheckDefined(tensor, "AllReduce");
  return Start("all-reduce", tensor, tensor);
}

std::shared_ptr<Work> MetaCommunicator::ReduceScatter(Tensor input, Tensor output, ReduceOp) {
  CheckBlockShapes("ReduceScatter", input, output, world_);
  return Start("reduce-scatter", input, output);
}

std::shared_ptr<Work> MetaCommunicator::AllGather(Tensor input, Tensor output) {
  CheckBlockShapes("AllGather", output, input, world_);
  return Start("all-gather", input, output);
}

std::shared_ptr<Work> MetaCommunicator::Broadcast(Tensor tensor, int root) {
  CheckDefined(tensor, "Broadcast");
  CHECK(root >= 0 && root < world_) << "Broadcast from rank " << root << " of " << world_;
  return Done();
}

std::shared_ptr<Work> MetaCommunicator::BroadcastCoalesced(std::vector<Tensor> tensors, int root) {
  for (const Tensor& t : tensors) CheckDefined(t, "BroadcastCoalesced");
  CHECK(root >= 0 && root < world_) << "BroadcastCoalesced from rank " << root << " of " << world_;
  return Done();
}

std::shared_ptr<Work> MetaCommunicator::Barrier() { return Done(); }

}  // namespace ddp
