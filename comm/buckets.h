// Gradient buckets, planned once from the model's static backward order:
// byte-capped (the first with its own cap), never splitting a parameter.
// Backward order is the reverse of registration order, so each bucket is one
// contiguous range of the flat parameter (and gradient) space.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/layers/model.h"

namespace ddp {

struct BucketPlan {
  std::vector<Parameter*> params;  // in backward order
  int64_t offset = 0, numel = 0;   // range in the flat parameter space
};

std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb);

// The same rule over parameter sizes alone, in backward order: how many
// parameters each bucket takes (the scaling model plans with it).
std::vector<size_t> PlanBucketCounts(const std::vector<int64_t>& bytes, double first_bucket_mb, double bucket_mb);

// Where each parameter starts in the flat parameter space.
std::unordered_map<const Parameter*, int64_t> FlatOffsets(const Model& model);

}  // namespace ddp
