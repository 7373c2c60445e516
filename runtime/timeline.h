// The timeline (--timeline): this process's events as Chrome trace events
// (complete events: a name, a category, a track, a start and a duration),
// recorded only while enabled. Host work is timed by the host clock; work
// on a GPU stream between CUDA events (host clocks would time launches),
// resolved to the host clock when the events are taken, against an anchor
// event recorded while the stream was idle.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/execution_context.h"

namespace ddp {

struct TimelineEvent {
  std::string name;
  const char* category = "";
  int track = 0;  // kComputeTrack, kCommTrack, kDataTrack
  double start = 0.0, duration = 0.0;  // host seconds (SteadySeconds)
  int64_t step = 0;
};

class Timeline {
 public:
  static constexpr int kComputeTrack = 0, kCommTrack = 1, kDataTrack = 2;
  static Timeline& Get();

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // Steps that record (1-based, inclusive); `stream` (null on CPU ranks) is
  // the compute stream its GPU events go on.
  void Start(int device, void* stream);
  void SetStep(int64_t step, bool recording);
  void Stop() { enabled_ = false; }

  // A host-timed event.
  void Add(std::string name, const char* category, int track, double start, double duration);
  // A GPU-timed event on the compute stream: Begin records its start
  // there, End its end.
  int BeginGpu();
  void EndGpu(int id, std::string name, const char* category);
  // Every event so far, GPU ones resolved (the stream synchronized first).
  std::vector<TimelineEvent> Take();

 private:
  struct Pending {
    void* begin;
    void* end;
    std::string name;
    const char* category;
    int64_t step;
  };
  std::atomic<bool> enabled_{false};  // this step records
  bool started_ = false;
  int64_t step_ = 0;
  int device_ = -1;
  void* stream_ = nullptr;
  void* anchor_ = nullptr;
  double anchor_host_ = 0.0;
  std::mutex mu_;
  std::vector<TimelineEvent> events_;
  std::vector<Pending> pending_;
  std::vector<void*> free_events_;
};

// Times a scope (a layer's forward or backward): by the host clock on the
// CPU, between CUDA events on a GPU stream. Nothing when not recording.
class TimelineScope {
 public:
  TimelineScope(const ExecutionContext& ctx, const std::string& name, const char* category,
                int track = Timeline::kComputeTrack);
  ~TimelineScope();
  TimelineScope(const TimelineScope&) = delete;
  TimelineScope& operator=(const TimelineScope&) = delete;

 private:
  bool on_ = false, gpu_ = false;
  int id_ = -1;
  std::string name_;
  const char* category_;
  int track_;
  double start_ = 0.0;
};

}  // namespace ddp
