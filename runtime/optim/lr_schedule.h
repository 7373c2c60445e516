// Learning-rate schedules: linear warmup, then constant, cosine, step or
// poly decay over the remaining steps.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.h"

namespace ddp {

struct LrSchedule {
  enum class Kind { kConstant, kCosine, kStep, kPoly, kLinear };
  Kind kind = Kind::kConstant;
  double base_lr = 0.1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  int64_t step_size = 0;  // kStep: decay every this many steps after warmup
  double step_gamma = 0.1;
  double poly_power = 2.0;

  // The rate for 0-based `step`: base_lr * (step + 1) / warmup_steps during
  // warmup; afterwards, with t = step - warmup and T = total - warmup,
  // constant base_lr, cosine base_lr * (1 + cos(pi t / T)) / 2, step
  // base_lr * gamma^floor(t / step_size), poly base_lr * (1 - t / T)^power,
  // linear base_lr * (1 - t / T) (Hugging Face's linear schedule, BERT's).
  double At(int64_t step) const;
};

// "constant", "cosine", "step", "poly" or "linear"; anything else names the
// flag.
StatusOr<LrSchedule::Kind> ParseLrScheduleKind(const std::string& name);
// The --lr-schedule spelling of `kind`.
std::string LrScheduleKindName(LrSchedule::Kind kind);

}  // namespace ddp
