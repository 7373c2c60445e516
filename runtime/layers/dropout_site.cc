#include "runtime/layers/dropout_site.h"

#include <glog/logging.h>

#include "runtime/ops/transformer.h"

namespace ddp {

Tensor DropoutSite::Forward(ExecutionContext& ctx, const Tensor& x) {
  p_ = state_->dropout;
  if (p_ == 0.0f) return x;
  samples_ = state_->batch;
  CHECK(samples_ > 0 && x.numel() % samples_ == 0) << "dropout over " << x.DebugString() << " of " << samples_
                                                    << " samples";
  key_ = DropoutKey{state_->seed, state_->step, site_};
  first_sample_ = state_->first_sample;
  return Dropped(ctx, x);
}

Tensor DropoutSite::Backward(ExecutionContext& ctx, const Tensor& dy) {
  if (p_ == 0.0f) return dy;
  CHECK_EQ(dy.numel() % samples_, 0) << "dropout backward of " << dy.DebugString() << " over " << samples_
                                     << " samples";
  Tensor dx = Dropped(ctx, dy);
  p_ = 0.0f;
  return dx;
}

Tensor DropoutSite::Dropped(ExecutionContext& ctx, const Tensor& x) const {
  Tensor y = Tensor::EmptyLike(x);
  const Shape per_sample = {samples_, x.numel() / samples_};
  Tensor y_view = y.View(0, per_sample), no_mask;
  DropoutForward(ctx, x.View(0, per_sample), p_, key_, first_sample_, y_view, no_mask);
  return y;
}

}  // namespace ddp
