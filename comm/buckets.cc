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

std::vector<BucketSpan> PlanBucketSpans(const std::vector<int64_t>& numels, int64_t element_bytes,
                                        const std::vector<bool>& splittable, double first_bucket_mb,
                                        double bucket_mb, int64_t align) {
  CHECK(bucket_mb > 0.0 && first_bucket_mb > 0.0) << "bucket sizes must be positive";
  CHECK(element_bytes > 0 && align > 0) << "element bytes " << element_bytes << ", alignment " << align;
  CHECK(splittable.empty() || splittable.size() == numels.size()) << "one splittable flag per parameter";
  const double mib = 1048576.0;
  // A split parameter's slices: the most elements of whole `align`s that
  // fit under --bucket-mb (at least one `align`).
  const int64_t slice = std::max<int64_t>(
      align, static_cast<int64_t>(bucket_mb * mib) / element_bytes / align * align);
  std::vector<BucketSpan> spans;
  BucketSpan current;
  int64_t held = 0;
  // A bucket closes once it reaches its cap (the first bucket's is
  // --first-bucket-mb, as PyTorch DDP's); a parameter that would take any
  // bucket past --bucket-mb starts the next.
  auto cap = [&] { return (spans.empty() ? std::min(first_bucket_mb, bucket_mb) : bucket_mb) * mib; };
  auto close = [&] {
    if (current.count == 0) return;
    spans.push_back(current);
    current = BucketSpan();
    held = 0;
  };
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t bytes = numels[i] * element_bytes;
    const bool may_split = splittable.empty() || splittable[i];
    if (may_split && static_cast<double>(bytes) > bucket_mb * mib) {
      close();
      // Highest slice first: backward order walks the flat space downwards.
      for (int64_t begin = (numels[i] - 1) / slice * slice; begin >= 0; begin -= slice) {
        spans.push_back({i, 1, begin, std::min(numels[i], begin + slice), true});
      }
      continue;
    }
    if (current.count > 0 && static_cast<double>(held + bytes) > bucket_mb * mib) close();
    if (current.count == 0) current.first = i;
    ++current.count;
    held += bytes;
    if (static_cast<double>(held) >= cap()) close();
  }
  close();
  return spans;
}

std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb, int64_t align,
                                    bool rearranged_whole) {
  std::unordered_map<const Parameter*, int64_t> offset = FlatOffsets(model);
  const std::vector<Parameter*> order = model.BackwardOrder();
  std::vector<int64_t> numels;
  std::vector<bool> splittable;
  for (const Parameter* p : order) {
    numels.push_back(NumElements(p->shape));
    splittable.push_back(!rearranged_whole || !p->low.channels_last());
  }
  std::vector<BucketPlan> plans;
  for (const BucketSpan& span : PlanBucketSpans(numels, 4, splittable, first_bucket_mb, bucket_mb, align)) {
    BucketPlan plan;
    plan.split = span.split;
    for (size_t k = span.first; k < span.first + span.count; ++k) {
      plan.params.push_back(order[k]);
      plan.numel += NumElements(order[k]->shape);
    }
    // Backward order walks the flat space downwards: the last parameter is
    // the lowest.
    plan.offset = offset[plan.params.back()];
    for (size_t k = 0; k + 1 < plan.params.size(); ++k) {
      CHECK_EQ(offset[plan.params[k]], offset[plan.params[k + 1]] + NumElements(plan.params[k + 1]->shape))
          << "bucket parameters " << plan.params[k]->name << " and " << plan.params[k + 1]->name
          << " are not adjacent";
    }
    if (span.split) {
      plan.offset += span.begin;
      plan.numel = span.end - span.begin;
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<BucketGroup> GroupBuckets(const std::vector<BucketPlan>& plans, int world) {
  std::vector<BucketGroup> groups;
  for (int k = 0; k < static_cast<int>(plans.size()); ++k) {
    const BucketPlan& b = plans[k];
    const bool joins = b.split && !groups.empty() && plans[groups.back().last].split &&
                       plans[groups.back().last].params[0] == b.params[0];
    if (!joins) groups.push_back({k, k, b.offset, 0});
    BucketGroup& g = groups.back();
    g.last = k;
    g.base = b.offset;  // slices come highest first: the latest is the lowest
  }
  for (BucketGroup& g : groups) {
    for (int k = g.first; k <= g.last; ++k) {
      g.size = std::max(g.size, plans[k].offset - g.base + ShardSize(plans[k].numel, world) * world);
    }
  }
  return groups;
}

}  // namespace ddp
