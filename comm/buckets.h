// Gradient buckets, planned once from the model's static backward order:
// byte-capped (the first with its own cap), never splitting a parameter.
// Backward order is the reverse of registration order, so each bucket is one
// contiguous range of the flat parameter (and gradient) space.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/layers/model.h"

namespace ddp {

// How gradients are bucketed and sent: what DDP's Reducer, ZeRO's
// ZeroReducer and the trainer's GradientSync share (each options struct
// extends it).
struct BucketOptions {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool overlap = true;  // false: reduce only after backward (--nooverlap, for measuring)
  // kF32: none; kBF16 or kF16 halve the bytes on the wire
  // (--grad-compression).
  DType wire_dtype = DType::kF32;
};

struct BucketPlan {
  std::vector<Parameter*> params;  // in backward order
  int64_t offset = 0, numel = 0;   // range in the flat parameter space
};

std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb);

// The same rule over parameter sizes alone, in backward order: how many
// parameters each bucket takes (the scaling model plans with it).
std::vector<size_t> PlanBucketCounts(const std::vector<int64_t>& bytes, double first_bucket_mb, double bucket_mb);

// ZeRO's split of a bucket of `numel` elements among `world` ranks, padded
// to a multiple of `world`: each rank's piece (the shard), and how many of
// rank `rank`'s shard are elements of the bucket (0 <= owned <= shard).
inline int64_t ShardSize(int64_t numel, int world) { return (numel + world - 1) / world; }
inline int64_t OwnedElements(int64_t numel, int world, int rank) {
  const int64_t shard = ShardSize(numel, world);
  return std::max<int64_t>(0, std::min(shard, numel - rank * shard));
}

// Where each parameter starts in the flat parameter space.
std::unordered_map<const Parameter*, int64_t> FlatOffsets(const Model& model);

}  // namespace ddp
