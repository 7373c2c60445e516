#include "launch/step_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/clock.h"
#include "runtime/durable_files.h"

namespace ddp {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StepProfiler::StepProfiler(Model* model)
    : model_(model), inner_(model->gradient_ready_hook()), order_(model->BackwardOrder()) {
  for (size_t k = 0; k < order_.size(); ++k) index_of_[order_[k]] = k;
  ready_.assign(order_.size(), -1.0);
  readies_.resize(order_.size());
  model_->SetGradientReadyHook(this);
}

StepProfiler::~StepProfiler() {
  if (model_->gradient_ready_hook() == this) model_->SetGradientReadyHook(inner_);
}

void StepProfiler::PrepareParameter(Parameter& param) {
  if (inner_) inner_->PrepareParameter(param);
}

void StepProfiler::PrepareGradient(Parameter& param) {
  if (inner_) inner_->PrepareGradient(param);
}

void StepProfiler::MarkGradientReady(Parameter& param) {
  if (in_last_) {
    auto it = index_of_.find(&param);
    if (it != index_of_.end()) ready_[it->second] = SteadySeconds() - backward_start_;
  }
  if (inner_) inner_->MarkGradientReady(param);
}

void StepProfiler::ForwardStarted() { started_ = SteadySeconds(); }
void StepProfiler::ForwardFinished() { forward_ += SteadySeconds() - started_; }

void StepProfiler::BackwardStarted(bool last) {
  backward_start_ = SteadySeconds();
  in_last_ = last;
}

void StepProfiler::BackwardFinished() {
  const double seconds = SteadySeconds() - backward_start_;
  backward_ += seconds;
  if (in_last_) last_backward_ = seconds;
  in_last_ = false;
}

void StepProfiler::StepFinished(double step_seconds, bool timed) {
  if (timed) {
    steps_.push_back(step_seconds);
    forwards_.push_back(forward_);
    backwards_.push_back(backward_);
    last_backwards_.push_back(last_backward_);
    // A gradient the hook never saw (a frozen parameter) counts as ready
    // when backward finished.
    for (size_t k = 0; k < order_.size(); ++k) readies_[k].push_back(ready_[k] >= 0.0 ? ready_[k] : last_backward_);
  }
  forward_ = backward_ = last_backward_ = 0.0;
  std::fill(ready_.begin(), ready_.end(), -1.0);
}

nlohmann::ordered_json StepProfiler::ToJson(const nlohmann::ordered_json& about) const {
  nlohmann::ordered_json out = {{"format", "ddp_train step profile 1"}};
  for (const auto& [key, value] : about.items()) out[key] = value;
  const double step = Median(steps_), forward = Median(forwards_), backward = Median(backwards_);
  out["timed_steps"] = steps_.size();
  out["step_s"] = step;
  out["forward_s"] = forward;
  out["backward_s"] = backward;
  out["last_backward_s"] = Median(last_backwards_);
  // Input, loss, optimizer, the step's bookkeeping.
  out["other_s"] = std::max(0.0, step - forward - backward);
  // How much forward + backward varies step to step: ranks wait for the
  // slowest, so N ranks' steps take the expected maximum of N draws.
  double mean = 0.0, squares = 0.0;
  for (size_t k = 0; k < steps_.size(); ++k) mean += forwards_[k] + backwards_[k];
  mean /= static_cast<double>(steps_.size());
  for (size_t k = 0; k < steps_.size(); ++k) squares += std::pow(forwards_[k] + backwards_[k] - mean, 2);
  out["compute_sd_s"] = steps_.size() > 1 ? std::sqrt(squares / static_cast<double>(steps_.size() - 1)) : 0.0;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (size_t k = 0; k < order_.size(); ++k) {
    params.push_back({{"name", order_[k]->name},
                      {"bytes", static_cast<int64_t>(order_[k]->value.nbytes())},
                      {"ready_s", Median(readies_[k])}});
  }
  out["params"] = params;
  return out;
}

Status StepProfiler::Write(const std::string& path, const nlohmann::ordered_json& about) const {
  if (steps_.empty()) return FailedPrecondition("--profile-file " + path + ": no timed step to profile (run more steps)");
  const Status written = ReplaceFileAtomically(path, ToJson(about).dump(1) + "\n");
  return written.ok() ? written : Status(written.code(), "--profile-file " + written.message());
}

}  // namespace ddp
