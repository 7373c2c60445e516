#include "comm/buckets.h"

#include <unordered_map>

namespace ddp {

std::unordered_map<const Parameter*, int64_t> FlatOffsets(const Model& model) {
  std::unordered_map<const Parameter*, int64_t> offsets;
  int64_t running = 0;
  for (const Parameter* p : model.parameters()) {
    offsets[p] = running;
    running += NumElements(p->shape);
  }
  return offsets;
}

std::vector<size_t> PlanBucketCounts(const std::vector<int64_t>& bytes, double first_bucket_mb, double bucket_mb) {
  CHECK(bucket_mb > 0.0 && first_bucket_mb > 0.0) << "bucket sizes must be positive";
  std::vector<size_t> counts;
  size_t count = 0;
  int64_t held = 0;
  for (int64_t b : bytes) {
    ++count;
    held += b;
    const double cap_mb = counts.empty() ? first_bucket_mb : bucket_mb;
    if (static_cast<double>(held) >= cap_mb * 1048576.0) {
      counts.push_back(count);
      count = 0;
      held = 0;
    }
  }
  if (count > 0) counts.push_back(count);
  return counts;
}

std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb) {
  std::unordered_map<const Parameter*, int64_t> offset = FlatOffsets(model);
  const std::vector<Parameter*> order = model.BackwardOrder();
  std::vector<int64_t> sizes;
  for (const Parameter* p : order) sizes.push_back(NumElements(p->shape) * 4);  // f32
  std::vector<BucketPlan> plans;
  BucketPlan current;
  auto close = [&] {
    current.offset = offset[current.params.back()];  // backward order walks the flat space downwards
    for (size_t k = 0; k + 1 < current.params.size(); ++k) {
      CHECK_EQ(offset[current.params[k]], offset[current.params[k + 1]] + NumElements(current.params[k + 1]->shape))
          << "bucket parameters " << current.params[k]->name << " and " << current.params[k + 1]->name
          << " are not adjacent";
    }
    plans.push_back(std::move(current));
    current = BucketPlan();
  };
  size_t next = 0;
  for (size_t count : PlanBucketCounts(sizes, first_bucket_mb, bucket_mb)) {
    for (size_t k = 0; k < count; ++k, ++next) {
      current.params.push_back(order[next]);
      current.numel += NumElements(order[next]->shape);
    }
    close();
  }
  return plans;
}

}  // namespace ddp
