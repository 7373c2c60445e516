// When gradient buckets may launch during one synchronized backward, shared
// by the Reducer and the ZeroReducer: a bucket is complete once every one of
// its parameters was marked ready, and launches once complete and once every
// lower-numbered bucket has launched, so buckets always go out in index
// order and every rank issues the same collective sequence.
//
// It also records the gradient-ready order of the first synchronized
// backward. Backward order is static in this runtime and the buckets were
// planned from it, so that observed order must equal the static one, on
// every rank: FinishBackward decides it together, with one all-reduce.
#pragma once

#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "comm/buckets.h"
#include "comm/communicator.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

class BucketSchedule {
 public:
  BucketSchedule(const Model& model, const std::vector<BucketPlan>& plans);

  // Start of a synchronized backward: every bucket waits for all of its
  // parameters again.
  void Reset();
  // Either reducer's gradient-ready hook: marks `param` ready and, with
  // `overlap`, calls `launch` on each bucket that may launch now (complete,
  // every lower one launched), in order. Marking one twice in a backward is
  // a programming error (CHECK).
  void MarkGradientReady(const Parameter& param, bool overlap, const std::function<void(int)>& launch);
  // The next bucket in order whether complete or not (for launching after
  // backward); -1 once all have launched.
  int TakeNext();
  int next_to_launch() const { return next_; }
  // The buckets holding `param`, [first, last] (more than one: it was split).
  std::pair<int, int> buckets_of(const Parameter& param) const { return buckets_of_.at(&param); }
  int num_buckets() const { return static_cast<int>(pending_.size()); }

  // An error naming the first bucket that is still missing gradients.
  Status CheckComplete() const;
  // After a synchronized backward, with this rank's own verdict `local`.
  // The first time, on every rank alike: fails if this or any other rank
  // saw gradients out of the static order, or had `local` fail. Later,
  // returns `local`.
  Status FinishBackward(Communicator* comm, Status local);

 private:
  // Marks `param` ready in each of its buckets.
  void MarkReady(const Parameter& param);
  // The next bucket that may launch now, taken; -1 when there is none.
  int TakeLaunchable();

  std::unordered_map<const Parameter*, std::pair<int, int>> buckets_of_;
  std::vector<std::vector<const Parameter*>> params_;
  std::vector<int> pending_;
  std::vector<const Parameter*> expected_order_, observed_order_;
  bool order_checked_ = false;
  int next_ = 0;
};

}  // namespace ddp
