#include "comm/counting_communicator.h"

namespace ddp {

void CountingCommunicator::Count(std::atomic<int64_t>& kind, int64_t bytes, bool all_reduce) {
  if (counting_) kind += RingBytes(bytes, world_size(), all_reduce);
}

void CountingCommunicator::AddReplayed(const Traffic& t) {
  all_reduce_ += t.all_reduce;
  reduce_scatter_ += t.reduce_scatter;
  all_gather_ += t.all_gather;
  broadcast_ += t.broadcast;
}

std::shared_ptr<Work> CountingCommunicator::AllReduce(Tensor tensor, ReduceOp op) {
  Count(all_reduce_, static_cast<int64_t>(tensor.nbytes()), /*all_reduce=*/true);
  return inner_->AllReduce(std::move(tensor), op);
}

std::shared_ptr<Work> CountingCommunicator::ReduceScatter(Tensor input, Tensor output, ReduceOp op) {
  Count(reduce_scatter_, static_cast<int64_t>(input.nbytes()));
  return inner_->ReduceScatter(std::move(input), std::move(output), op);
}

std::shared_ptr<Work> CountingCommunicator::AllGather(Tensor input, Tensor output) {
  Count(all_gather_, static_cast<int64_t>(output.nbytes()));
  return inner_->AllGather(std::move(input), std::move(output));
}

std::shared_ptr<Work> CountingCommunicator::Broadcast(Tensor tensor, int root) {
  Count(broadcast_, static_cast<int64_t>(tensor.nbytes()));
  return inner_->Broadcast(std::move(tensor), root);
}

std::shared_ptr<Work> CountingCommunicator::BroadcastCoalesced(std::vector<Tensor> tensors, int root) {
  for (const Tensor& t : tensors) Count(broadcast_, static_cast<int64_t>(t.nbytes()));
  return inner_->BroadcastCoalesced(std::move(tensors), root);
}

Traffic CountingCommunicator::sent() const {
  return {all_reduce_.load(), reduce_scatter_.load(), all_gather_.load(), broadcast_.load()};
}

}  // namespace ddp
