#include "runtime/timeline.h"

#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"

namespace ddp {

Timeline& Timeline::Get() {
  static Timeline* timeline = new Timeline();
  return *timeline;
}

void Timeline::Start(int device, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  started_ = true;
  device_ = device;
  stream_ = stream;
  if (device_ >= 0) {
    // The anchor: recorded on an idle stream, it happens at the host time
    // read just before it.
    cuda::Synchronize(stream_);
    anchor_ = cuda::CreateTimingEvent();
    anchor_host_ = SteadySeconds();
    cuda::RecordEvent(anchor_, stream_);
  }
}

void Timeline::SetStep(int64_t step, bool recording) {
  step_ = step;
  enabled_ = started_ && recording;
}

void Timeline::Add(std::string name, const char* category, int track, double start, double duration) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({std::move(name), category, track, start, duration, step_});
}

int Timeline::BeginGpu() {
  std::lock_guard<std::mutex> lock(mu_);
  auto take = [&] {
    if (free_events_.empty()) return cuda::CreateTimingEvent();
    void* e = free_events_.back();
    free_events_.pop_back();
    return e;
  };
  Pending p{take(), take(), "", "", step_};
  cuda::RecordEvent(p.begin, stream_);
  pending_.push_back(std::move(p));
  return static_cast<int>(pending_.size()) - 1;
}

void Timeline::EndGpu(int id, std::string name, const char* category) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending& p = pending_[id];
  cuda::RecordEvent(p.end, stream_);
  p.name = std::move(name);
  p.category = category;
}

std::vector<TimelineEvent> Timeline::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) {
    cuda::Synchronize(stream_);
    for (Pending& p : pending_) {
      const double start = cuda::ElapsedSeconds(anchor_, p.begin), end = cuda::ElapsedSeconds(anchor_, p.end);
      if (start >= 0.0 && end >= start) {
        events_.push_back({p.name, p.category, kComputeTrack, anchor_host_ + start, end - start, p.step});
      }
      free_events_.push_back(p.begin);
      free_events_.push_back(p.end);
    }
    pending_.clear();
  }
  std::vector<TimelineEvent> out;
  out.swap(events_);
  return out;
}

TimelineScope::TimelineScope(const ExecutionContext& ctx, const std::string& name, const char* category, int track)
    : category_(category), track_(track) {
  Timeline& t = Timeline::Get();
  if (!t.enabled()) return;
  gpu_ = ctx.device().is_cuda();
  if (gpu_ && cuda::IsCapturing(ctx.cuda_stream())) return;  // a graph being captured: nothing runs yet
  on_ = true;
  name_ = name;
  if (gpu_) {
    id_ = t.BeginGpu();
  } else {
    start_ = SteadySeconds();
  }
}

TimelineScope::~TimelineScope() {
  if (!on_) return;
  Timeline& t = Timeline::Get();
  if (gpu_) {
    t.EndGpu(id_, std::move(name_), category_);
  } else {
    t.Add(std::move(name_), category_, track_, start_, SteadySeconds() - start_);
  }
}

}  // namespace ddp
