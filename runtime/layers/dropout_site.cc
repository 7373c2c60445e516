#include "runtime/layers/dropout_site.h"

#include <glog/logging.h>

#include "runtime/ops/transformer.h"

namespace ddp {

Tensor DropoutSite::Forward(ExecutionContext& ctx, const Tensor& x, bool keep_mask) {
  p_ = state_->dropout;
  keep_ = Tensor();
  if (p_ == 0.0f) return x;
  const int64_t samples = state_->batch;
  CHECK(samples > 0 && x.numel() % samples == 0) << "dropout over " << x.DebugString() << " of " << samples
                                                  << " samples";
  Tensor y = Tensor::EmptyLike(x);
  keep_ = Tensor::Empty(x.shape(), DType::kU8, x.device());
  const Shape per_sample = {samples, x.numel() / samples};
  Tensor y_view = y.View(0, per_sample);
  Tensor keep_view = keep_.View(0, per_sample);
  DropoutForward(ctx, x.View(0, per_sample), p_, DropoutKey{state_->seed, state_->step, site_}, state_->first_sample,
                 y_view, keep_view);
  if (!keep_mask) keep_ = Tensor();
  return y;
}

Tensor DropoutSite::Backward(ExecutionContext& ctx, const Tensor& dy) {
  if (!keep_.defined()) return dy;
  Tensor dx = Tensor::EmptyLike(dy);
  DropoutBackward(ctx, dy, keep_, p_, dx);
  keep_ = Tensor();
  return dx;
}

}  // namespace ddp
