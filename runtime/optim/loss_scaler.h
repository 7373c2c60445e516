// Loss scaling for 16-bit training, with the semantics of PyTorch's
// torch.amp.GradScaler: the loss gradient is multiplied by the scale before
// backward, so small gradients survive 16-bit activations; once per
// optimizer step the gradients are checked, and a step with any non-finite
// gradient (on any rank: the caller reduces the check first) is skipped.
// Dynamic scaling halves the scale on such a step and restarts the count;
// after `growth_interval` finite steps in a row it doubles the scale.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.h"

namespace ddp {

struct LossScalerOptions {
  enum class Mode { kNone, kStatic, kDynamic };
  Mode mode = Mode::kNone;
  double initial_scale = 65536.0;  // 2^16; the fixed scale in kStatic
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// --loss-scale: "dynamic", "none" or a positive number (a static scale).
StatusOr<LossScalerOptions> ParseLossScale(const std::string& flag);

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  // Whether gradients are scaled and checked at all (not in kNone).
  bool enabled() const { return options_.mode != LossScalerOptions::Mode::kNone; }
  bool dynamic() const { return options_.mode == LossScalerOptions::Mode::kDynamic; }
  // The factor for this step's loss gradient (1 when disabled).
  double scale() const { return scale_; }
  // Ends an optimizer step: `found_nonfinite` is whether any rank saw an
  // inf or NaN gradient. Returns true when the step must be skipped, and
  // updates the scale (dynamic mode).
  bool Update(bool found_nonfinite);
  // Finite steps since the last change of scale (PyTorch's growth tracker).
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t skipped_steps() const { return skipped_; }
  // Restoring a checkpoint.
  void Restore(double scale, int64_t growth_tracker, int64_t skipped) {
    scale_ = scale;
    growth_tracker_ = growth_tracker;
    skipped_ = skipped;
  }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace ddp
