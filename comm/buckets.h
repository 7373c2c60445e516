// Gradient buckets, planned once from the model's static backward order.
// Backward order is the reverse of registration order, so each bucket is one
// contiguous range of the flat parameter (and gradient) space. A bucket
// closes once it reaches its cap (the first bucket's is --first-bucket-mb,
// the rest --bucket-mb), and a parameter that would take it past
// --bucket-mb starts the next; a parameter larger than --bucket-mb is split
// into buckets of its own, as Megatron's gradient buffers and FSDP's flat
// parameters split them, so --bucket-mb bounds every bucket and every pool
// of buckets in flight. Under ZeRO a weight whose
// 16-bit copy is rearranged (channels-last) stays whole: the gather
// converts that copy whole.
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
  std::vector<Parameter*> params;  // in backward order: those with elements in the bucket
  int64_t offset = 0, numel = 0;   // range in the flat parameter space
  // A slice of one parameter too large for a bucket, whose slices are
  // consecutive buckets of their own; false: whole parameters.
  bool split = false;
};

// The rule over parameter sizes alone (the scaling model plans with it):
// one bucket takes the parameters [first, first + count) of the backward
// order, or, split, the elements [begin, end) of parameter `first`.
struct BucketSpan {
  size_t first = 0, count = 0;
  int64_t begin = 0, end = 0;
  bool split = false;
};
// `numels`: each parameter's elements in backward order, `element_bytes`
// each; `splittable[i]` false keeps parameter i whole (empty: any may
// split). A split parameter's slices are multiples of `align` elements
// from its start, the last aside, and come highest first (backward order
// walks the flat space downwards).
std::vector<BucketSpan> PlanBucketSpans(const std::vector<int64_t>& numels, int64_t element_bytes,
                                        const std::vector<bool>& splittable, double first_bucket_mb,
                                        double bucket_mb, int64_t align);

// The model's buckets, split slices `align` elements apart (ZeRO: the world
// size, so the padded slices of a parameter, laid end to end, are that
// parameter padded at its end); `rearranged_whole` keeps weights whose
// 16-bit copy is rearranged whole (ZeRO).
std::vector<BucketPlan> PlanBuckets(const Model& model, double first_bucket_mb, double bucket_mb, int64_t align = 1,
                                    bool rearranged_whole = false);

// Buckets whose buffers must be one allocation: the slices of one split
// parameter (its gradient and its value are one tensor), or one bucket
// alone. Buckets [first, last]; the buffer starts at flat offset `base` (the
// lowest bucket's) and holds `size` elements, each bucket padded to a
// multiple of `world` at offset - base.
struct BucketGroup {
  int first = 0, last = 0;
  int64_t base = 0, size = 0;
};
std::vector<BucketGroup> GroupBuckets(const std::vector<BucketPlan>& plans, int world);

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
