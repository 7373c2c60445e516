// Mixed precision for one run: the dtype activations compute in, the
// memory format, and the loss scaler it owns (runtime/optim/loss_scaler.h):
// the loss gradient's scale, the verdict on a step whose gradients or loss
// are not finite, and unscaling before the update.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/execution_context.h"
#include "runtime/layers/model.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/status.h"

namespace ddp {

struct PrecisionOptions {
  std::string precision = "fp32";    // --precision (after any CPU bf16 fallback)
  std::string memory_format = "auto";  // --memory-format
  LossScalerOptions loss_scale;      // --loss-scale
  bool gpu = false;                  // the rank trains on a GPU
  bool images = false;               // the batches hold 4-D image tensors
};

// What a step's agreement found, for the verdict.
struct StepHealth {
  int64_t step = 0;  // 1-based
  int rank = 0;
  double loss = 0.0;            // the mean over ranks
  bool any_nonfinite = false;   // some rank holds a non-finite gradient
  bool mine_nonfinite = false;  // this rank does
};

class Precision {
 public:
  // Refuses what cannot run (fp16 on a CPU, channels-last f32 on a GPU),
  // naming the flag.
  static StatusOr<std::unique_ptr<Precision>> Choose(const PrecisionOptions& options);

  // f32, or bf16/f16 under mixed precision.
  DType compute_dtype() const { return compute_dtype_; }
  // Channels-last: always on the CPU (oneDNN's NHWC kernels need no
  // reorders); on GPUs for 16-bit training, where cuDNN's tensor-core
  // kernels want NHWC. Only where batches hold images.
  bool channels_last() const { return channels_last_; }
  // The model's memory format, and its 16-bit weight copy where it trains
  // in 16 bits.
  void Apply(Model& model, ExecutionContext& ctx) const;

  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  // The loss gradient of a micro-batch: the scale over `divisor`
  // (micro-batches x ranks: the step's gradient is their mean).
  double LossGradient(int64_t divisor) const { return scaler_.scale() / static_cast<double>(divisor); }
  // After the step's agreement: whether the update is skipped. Under loss
  // scaling a non-finite gradient or loss on any rank skips it, as
  // GradScaler does, and the scale backs off; without, it is an error that
  // stops every rank before the optimizer touches the weights.
  // `first_nonfinite` names the parameter (asked only of a rank that found
  // one).
  StatusOr<bool> Verdict(const StepHealth& health, const std::function<std::string()>& first_nonfinite);
  // Gradients unscaled by the scale their step had (GradScaler.unscale_),
  // before clipping and the update.
  static void Unscale(ExecutionContext& ctx, const std::vector<Tensor>& grads, double step_scale);

 private:
  explicit Precision(const LossScalerOptions& loss_scale) : scaler_(loss_scale) {}
  DType compute_dtype_ = DType::kF32;
  bool channels_last_ = false;
  bool gpu_ = false;
  LossScaler scaler_;
};

}  // namespace ddp
