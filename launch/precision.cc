#include "launch/precision.h"

#include <cmath>

#include "launch/train_options.h"
#include "runtime/ops/elementwise.h"

namespace ddp {

StatusOr<std::unique_ptr<Precision>> Precision::Choose(const PrecisionOptions& options) {
  std::unique_ptr<Precision> p(new Precision(options.loss_scale));
  p->gpu_ = options.gpu;
  p->compute_dtype_ = ComputeDType(options.precision);
  if (p->compute_dtype_ == DType::kF16 && !options.gpu) {
    return InvalidArgument("--precision fp16 is for GPUs; on the CPU use --precision bf16");
  }
  const bool sixteen_bit = p->compute_dtype_ != DType::kF32;
  if (options.memory_format == "channels_last" && options.gpu && !sixteen_bit) {
    return Unimplemented("--memory-format channels_last on GPUs needs --precision fp16 or bf16 (its convolutions "
                         "read a [K, R, S, C] 16-bit weight copy, which " + options.precision +
                         " runs do not keep); use auto or contiguous");
  }
  p->channels_last_ = options.images && (options.memory_format == "channels_last" ||
                                         (options.memory_format == "auto" && (!options.gpu || sixteen_bit)));
  return p;
}

void Precision::Apply(Model& model, ExecutionContext& ctx) const {
  model.set_channels_last(channels_last_);
  if (compute_dtype_ != DType::kF32) {
    model.EnableLowPrecision(ctx, compute_dtype_,
                             gpu_ && channels_last_ ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous);
  }
}

StatusOr<bool> Precision::Verdict(const StepHealth& health, const std::function<std::string()>& first_nonfinite) {
  const std::string where = " at step " + std::to_string(health.step);
  if (!scaler_.enabled()) {
    if (health.any_nonfinite && !health.mine_nonfinite) {
      return FailedPrecondition("another rank found a non-finite gradient" + where +
                                "; stopping before the optimizer step");
    }
    if (health.any_nonfinite) {
      return FailedPrecondition("non-finite gradient" + where + " on rank " + std::to_string(health.rank) +
                                ", first in '" + first_nonfinite() +
                                "'; stopping before the optimizer step touches the weights (look for NaN or Inf in "
                                "the data, or lower --lr)");
    }
    // Without loss scaling a non-finite loss means divergence; every rank
    // sees the same all-reduced loss.
    if (!std::isfinite(health.loss)) {
      return FailedPrecondition("loss is " + std::to_string(health.loss) + where + "; try a lower --lr");
    }
  }
  // Under loss scaling an overflowing forward (fp16) skips the step too.
  return scaler_.Update(health.any_nonfinite || !std::isfinite(health.loss));
}

void Precision::Unscale(ExecutionContext& ctx, const std::vector<Tensor>& grads, double step_scale) {
  if (step_scale == 1.0) return;
  for (Tensor g : grads) Scale(ctx, static_cast<float>(1.0 / step_scale), g);
}

}  // namespace ddp
