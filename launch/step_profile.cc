#include "launch/step_profile.h"

#include "runtime/durable_files.h"

#include <algorithm>
#include <cmath>

#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/median.h"

namespace ddp {

StepProfiler::StepProfiler(Model* model, void* stream)
    : model_(model), inner_(model->gradient_ready_hook()), stream_(stream), order_(model->BackwardOrder()) {
  for (size_t k = 0; k < order_.size(); ++k) index_of_[order_[k]] = k;
  readies_.resize(order_.size());
  model_->SetGradientReadyHook(this);
}

StepProfiler::~StepProfiler() {
  if (model_->gradient_ready_hook() == this) model_->SetGradientReadyHook(inner_);
  for (void* e : events_) cuda::DestroyEvent(e);
}

void StepProfiler::Add(Kind kind, size_t param) {
  Mark m{kind, param, SteadySeconds(), nullptr};
  if (stream_ != nullptr) {
    if (events_used_ == events_.size()) events_.push_back(cuda::CreateTimingEvent());
    m.event = events_[events_used_++];
    cuda::RecordEvent(m.event, stream_);
  }
  marks_.push_back(m);
}

double StepProfiler::Between(const Mark& a, const Mark& b) const {
  return stream_ != nullptr ? cuda::ElapsedSeconds(a.event, b.event) : b.host - a.host;
}

void StepProfiler::PrepareParameter(const Parameter& param) {
  if (inner_) inner_->PrepareParameter(param);
}

void StepProfiler::PrepareGradient(Parameter& param) {
  if (inner_) inner_->PrepareGradient(param);
}

void StepProfiler::MarkGradientReady(Parameter& param) {
  if (in_last_) {
    auto it = index_of_.find(&param);
    if (it != index_of_.end()) Add(kReady, it->second);
  }
  if (inner_) inner_->MarkGradientReady(param);
}

void StepProfiler::ForwardStarted() { Add(kForwardStart); }
void StepProfiler::ForwardFinished() { Add(kForwardEnd); }

void StepProfiler::BackwardStarted(bool last) {
  in_last_ = last;
  Add(last ? kLastBackwardStart : kBackwardStart);
}

void StepProfiler::BackwardFinished() {
  Add(kBackwardEnd);
  in_last_ = false;
}

void StepProfiler::StepFinished(double step_seconds, bool timed) {
  if (timed && !marks_.empty()) {
    if (stream_ != nullptr) cuda::EventSynchronize(marks_.back().event);
    double forward = 0.0, backward = 0.0, last_backward = 0.0;
    std::vector<double> ready(order_.size(), -1.0);
    const Mark* open = nullptr;  // the forward or backward under way
    const Mark* last_start = nullptr;
    for (const Mark& m : marks_) {
      switch (m.kind) {
        case kForwardStart:
        case kBackwardStart: open = &m; break;
        case kLastBackwardStart: open = last_start = &m; break;
        case kForwardEnd: forward += open ? Between(*open, m) : 0.0; break;
        case kBackwardEnd: {
          const double seconds = open ? Between(*open, m) : 0.0;
          backward += seconds;
          if (open == last_start) last_backward = seconds;
          break;
        }
        case kReady: ready[m.param] = last_start ? Between(*last_start, m) : 0.0; break;
      }
    }
    steps_.push_back(step_seconds);
    forwards_.push_back(forward);
    backwards_.push_back(backward);
    last_backwards_.push_back(last_backward);
    // A gradient the hook never saw (a frozen parameter) counts as ready
    // when backward finished.
    for (size_t k = 0; k < order_.size(); ++k) readies_[k].push_back(ready[k] >= 0.0 ? ready[k] : last_backward);
  }
  marks_.clear();
  events_used_ = 0;
}

StepProfile StepProfiler::Summary() const {
  StepProfile out;
  out.timed_steps = static_cast<int64_t>(steps_.size());
  out.step_s = Median(steps_);
  out.forward_s = Median(forwards_);
  out.backward_s = Median(backwards_);
  out.last_backward_s = Median(last_backwards_);
  // Input, loss, optimizer, the step's bookkeeping.
  out.other_s = std::max(0.0, out.step_s - out.forward_s - out.backward_s);
  // How much forward + backward varies step to step: ranks wait for the
  // slowest, so N ranks' steps take the expected maximum of N draws. A
  // robust standard deviation (1.4826 x the median absolute deviation), as
  // step times are compared by their medians: a few stalled steps of a
  // shared machine would inflate a plain one.
  std::vector<double> compute(steps_.size()), deviation(steps_.size());
  for (size_t k = 0; k < steps_.size(); ++k) compute[k] = forwards_[k] + backwards_[k];
  const double center = Median(compute);
  for (size_t k = 0; k < steps_.size(); ++k) deviation[k] = std::fabs(compute[k] - center);
  out.compute_sd_s = 1.4826 * Median(deviation);
  for (size_t k = 0; k < order_.size(); ++k) {
    // f32 bytes: ZeRO may hold the value in shards.
    out.params.push_back({order_[k]->name, NumElements(order_[k]->shape) * 4, Median(readies_[k])});
  }
  return out;
}

Status WriteStepProfile(const std::string& path, const StepProfiler& profiler, const ProfileRun& run) {
  StepProfile profile = profiler.Summary();
  if (profile.timed_steps == 0) {
    return FailedPrecondition("--profile-file " + path + ": no timed step to profile (run more steps)");
  }
  profile.model = run.model;
  profile.device = run.device;
  if (!run.peer_access.empty()) profile.peer_access = run.peer_access;
  profile.world_size = run.world_size;
  profile.threads = run.threads;
  profile.accumulation_steps = run.accumulation_steps;
  profile.samples_per_step = run.samples_per_step;
  nlohmann::ordered_json json = StepProfileJson(profile);
  json["precision"] = run.precision;
  json["batch_size"] = run.batch_size;
  json["image_size"] = run.image_size;
  json["seq_len"] = run.seq_len;
  const Status written = ReplaceFileAtomically(path, json.dump(1) + "\n");
  if (!written.ok()) return Status(written.code(), "--profile-file " + written.message());
  return Status::Ok();
}

}  // namespace ddp
