#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ddp {

double LrSchedule::At(int64_t step) const {
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double t = static_cast<double>(step - warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  switch (kind) {
    case Kind::kConstant: return base_lr;
    case Kind::kCosine: return base_lr * 0.5 * (1.0 + std::cos(M_PI * std::min(t, span) / span));
    case Kind::kStep: {
      const int64_t every = step_size > 0 ? step_size : std::max<int64_t>(1, (total_steps - warmup_steps) / 3);
      return base_lr * std::pow(step_gamma, std::floor(t / static_cast<double>(every)));
    }
    case Kind::kPoly: return base_lr * std::pow(std::max(0.0, 1.0 - t / span), poly_power);
    case Kind::kLinear: return base_lr * std::max(0.0, 1.0 - t / span);
  }
  return base_lr;
}

StatusOr<LrSchedule::Kind> ParseLrScheduleKind(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::kConstant;
  if (name == "cosine") return LrSchedule::Kind::kCosine;
  if (name == "step") return LrSchedule::Kind::kStep;
  if (name == "poly") return LrSchedule::Kind::kPoly;
  if (name == "linear") return LrSchedule::Kind::kLinear;
  return InvalidArgument("--lr-schedule '" + name + "' is unknown; use constant, cosine, step, poly or linear");
}

}  // namespace ddp
