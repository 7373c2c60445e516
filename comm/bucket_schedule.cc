#include "comm/bucket_schedule.h"

#include <string>

namespace ddp {

BucketSchedule::BucketSchedule(const Model& model, const std::vector<BucketPlan>& plans) {
  for (const BucketPlan& plan : plans) {
    const int k = static_cast<int>(params_.size());
    for (const Parameter* p : plan.params) {
      auto it = buckets_of_.emplace(p, std::make_pair(k, k)).first;
      it->second.second = k;  // a split parameter's slices are consecutive buckets
    }
    params_.emplace_back(plan.params.begin(), plan.params.end());
  }
  for (const Parameter* p : model.BackwardOrder()) expected_order_.push_back(p);
  pending_.assign(params_.size(), 0);
}

void BucketSchedule::Reset() {
  for (size_t k = 0; k < params_.size(); ++k) pending_[k] = static_cast<int>(params_[k].size());
  next_ = 0;
  observed_order_.clear();
}

void BucketSchedule::MarkReady(const Parameter& param) {
  if (!order_checked_) observed_order_.push_back(&param);
  auto it = buckets_of_.find(&param);
  CHECK(it != buckets_of_.end()) << "gradient-ready hook for " << param.name << ", which no bucket holds";
  for (int k = it->second.first; k <= it->second.second; ++k) {
    CHECK_GT(pending_[k], 0) << param.name << " marked ready twice in one backward";
    --pending_[k];
  }
}

void BucketSchedule::MarkGradientReady(const Parameter& param, bool overlap,
                                       const std::function<void(int)>& launch) {
  MarkReady(param);
  if (!overlap) return;
  for (int k = TakeLaunchable(); k >= 0; k = TakeLaunchable()) launch(k);
}

int BucketSchedule::TakeLaunchable() {
  if (next_ < num_buckets() && pending_[next_] == 0) return next_++;
  return -1;
}

int BucketSchedule::TakeNext() { return next_ < num_buckets() ? next_++ : -1; }

Status BucketSchedule::CheckComplete() const {
  for (int k = 0; k < num_buckets(); ++k) {
    if (pending_[k] == 0) continue;
    return Internal("bucket " + std::to_string(k) + " is missing " + std::to_string(pending_[k]) +
                    " gradient(s), e.g. of " + params_[k].back()->name);
  }
  return Status::Ok();
}

Status BucketSchedule::FinishBackward(Communicator* comm, Status local) {
  if (order_checked_) return local;
  order_checked_ = true;
  if (local.ok() && observed_order_ != expected_order_) {
    size_t i = 0;
    while (i < observed_order_.size() && i < expected_order_.size() && observed_order_[i] == expected_order_[i]) ++i;
    local = Internal("gradient-ready order differs from the static backward order at position " + std::to_string(i) +
                     ": expected " + (i < expected_order_.size() ? expected_order_[i]->name : std::string("nothing")) +
                     ", got " + (i < observed_order_.size() ? observed_order_[i]->name : std::string("nothing")));
  }
  observed_order_.clear();
  Tensor flag = Tensor::FromVector<int32_t>({local.ok() ? 0 : 1}, {1});
  RETURN_IF_ERROR(comm->AllReduce(flag, ReduceOp::kSum)->Wait());
  if (!local.ok()) return local;
  const int others = flag.data<int32_t>()[0];
  if (others != 0) {
    return Internal(std::to_string(others) +
                    " other rank(s) saw gradients arrive out of the static backward order or missing");
  }
  return Status::Ok();
}

}  // namespace ddp
