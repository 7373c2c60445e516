#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

namespace {

constexpr std::pair<LrSchedule::Kind, const char*> kKindNames[] = {{LrSchedule::Kind::kConstant, "constant"},
                                                                  {LrSchedule::Kind::kCosine, "cosine"},
                                                                  {LrSchedule::Kind::kStep, "step"},
                                                                  {LrSchedule::Kind::kPoly, "poly"},
                                                                  {LrSchedule::Kind::kLinear, "linear"}};

}  // namespace

StatusOr<LrSchedule::Kind> ParseLrScheduleKind(const std::string& name) {
  for (const auto& [kind, spelled] : kKindNames) {
    if (name == spelled) return kind;
  }
  return InvalidArgument("--lr-schedule '" + name + "' is unknown; use constant, cosine, step, poly or linear");
}

std::string LrScheduleKindName(LrSchedule::Kind kind) {
  for (const auto& [k, spelled] : kKindNames) {
    if (k == kind) return spelled;
  }
  return "?";
}

}  // namespace ddp
