#include "runtime/optim/loss_scaler.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace ddp {

StatusOr<LossScalerOptions> ParseLossScale(const std::string& flag) {
  LossScalerOptions options;
  if (flag == "dynamic") {
    options.mode = LossScalerOptions::Mode::kDynamic;
    return options;
  }
  if (flag == "none") return options;
  char* end = nullptr;
  const double value = std::strtod(flag.c_str(), &end);
  if (flag.empty() || *end != '\0' || !std::isfinite(value) || value <= 0.0) {
    return InvalidArgument("--loss-scale '" + flag + "' is neither dynamic, none nor a positive number");
  }
  if (value > std::numeric_limits<float>::max()) {
    return InvalidArgument("--loss-scale " + flag + " overflows f32, in which gradients are scaled");
  }
  options.mode = LossScalerOptions::Mode::kStatic;
  options.initial_scale = value;
  return options;
}

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options), scale_(options.mode == LossScalerOptions::Mode::kNone ? 1.0 : options.initial_scale) {}

bool LossScaler::Update(bool found_nonfinite) {
  if (!enabled()) return false;
  if (found_nonfinite) {
    ++skipped_;
    if (dynamic()) {
      scale_ *= options_.backoff_factor;
      growth_tracker_ = 0;
    }
    return true;
  }
  if (dynamic() && ++growth_tracker_ == options_.growth_interval) {
    // GradScaler keeps the old scale should growth overflow to inf (in f32,
    // the type gradients are scaled in).
    const double grown = scale_ * options_.growth_factor;
    if (grown <= std::numeric_limits<float>::max()) scale_ = grown;
    growth_tracker_ = 0;
  }
  return false;
}

}  // namespace ddp
