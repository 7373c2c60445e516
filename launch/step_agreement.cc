#include "launch/step_agreement.h"

#include <type_traits>
#include <vector>

#include "comm/watchdog.h"

namespace ddp {

StatusOr<StepVotes> SumStepVotes(Communicator* comm, const StepVotes& mine) {
  if (comm == nullptr) return mine;
  std::vector<double> wire;
  StepVotes sum = mine;
  ForEachVote(sum, [&](const auto& vote) { wire.push_back(static_cast<double>(vote)); });
  Tensor shared = Tensor::FromVector<double>(wire, {static_cast<int64_t>(wire.size())});
  const CollectiveLabel label("the step's all-reduce of losses and agreements");
  RETURN_IF_ERROR(comm->AllReduce(shared, ReduceOp::kSum)->Wait());
  const double* summed = shared.data<double>();
  ForEachVote(sum, [&](auto& vote) { vote = static_cast<std::remove_reference_t<decltype(vote)>>(*summed++); });
  return sum;
}

Status AgreeOnStatus(Communicator* comm, const Status& local, const std::string& if_another_failed) {
  if (comm == nullptr) return local;
  Tensor failed = Tensor::FromVector<double>({local.ok() ? 0.0 : 1.0}, {1});
  RETURN_IF_ERROR(comm->AllReduce(failed, ReduceOp::kSum)->Wait());
  if (!local.ok()) return local;
  if (failed.data<double>()[0] > 0.0) return FailedPrecondition(if_another_failed);
  return Status::Ok();
}

}  // namespace ddp
