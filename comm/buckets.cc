#include "comm/buckets.h"

#include <unordered_map>

namespace ddp {

std::unordered_map<const Parameter*, int64_t> FlatOffsets(const Model& model) {
  std::unordered_map<const Parameter*, int64_t> offsets;
  int64_t running = 0;
  for (const Parameter* p : model.parameters()) {
    offsets[p] = running;
    running += p->value.numel();
  }
  return offsets;
}

std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb) {
  CHECK(bucket_mb > 0.0 && first_bucket_mb > 0.0) << "bucket sizes must be positive";
  std::unordered_map<const Parameter*, int64_t> offset = FlatOffsets(model);
  std::vector<BucketPlan> plans;
  BucketPlan current;
  int64_t bytes = 0;
  auto close = [&] {
    current.offset = offset[current.params.back()];  // backward order walks the flat space downwards
    for (size_t k = 0; k + 1 < current.params.size(); ++k) {
      CHECK_EQ(offset[current.params[k]], offset[current.params[k + 1]] + current.params[k + 1]->value.numel())
          << "bucket parameters " << current.params[k]->name << " and " << current.params[k + 1]->name
          << " are not adjacent";
    }
    plans.push_back(std::move(current));
    current = BucketPlan();
    bytes = 0;
  };
  for (Parameter* p : model.BackwardOrder()) {
    current.params.push_back(p);
    current.numel += p->value.numel();
    bytes += static_cast<int64_t>(p->value.nbytes());
    const double cap_mb = plans.empty() ? first_bucket_mb : bucket_mb;
    if (static_cast<double>(bytes) >= cap_mb * 1048576.0) close();
  }
  if (!current.params.empty()) close();
  return plans;
}

}  // namespace ddp
