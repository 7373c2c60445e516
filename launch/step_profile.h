// A rank's step profile: the scaling model's input (comm/scaling_model.h).
//
// Per timed step: the forward and backward time of its micro-batches, and,
// in the backward the gradient reduction overlaps (the last micro-batch's),
// when each parameter's gradient became final. Written by --profile-file as
// the medians over the timed steps, with each parameter's bytes, in backward
// order: from it the model rebuilds any bucket layout's ready times.
//
// On a CPU rank host clocks time the work; on a GPU rank CUDA events on the
// compute stream do (each timed step then ends with a wait for its last
// event).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "comm/scaling_model.h"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

class StepProfiler : public GradientReadyHook {
 public:
  // Installs itself as the model's gradient-ready hook, passing every call
  // on to the hook installed before it (the reducer's), if any.
  // `stream`: the compute stream on a GPU rank, whose events time the work;
  // nullptr on a CPU rank.
  explicit StepProfiler(Model* model, void* stream = nullptr);
  ~StepProfiler() override;

  void PrepareParameter(const Parameter& param) override;
  void PrepareGradient(Parameter& param) override;
  void MarkGradientReady(Parameter& param) override;

  // Around each micro-batch's forward and backward; `last` marks the
  // backward whose gradient-ready times are kept.
  void ForwardStarted();
  void ForwardFinished();
  void BackwardStarted(bool last);
  void BackwardFinished();
  // The step's wall time; only timed steps are kept.
  void StepFinished(double step_seconds, bool timed);

  // The medians over the timed steps, with each parameter's bytes in
  // backward order; the caller fills in what was profiled (model, device,
  // ranks, threads, samples per step).
  StepProfile Summary() const;

 private:
  enum Kind { kForwardStart, kForwardEnd, kBackwardStart, kLastBackwardStart, kBackwardEnd, kReady };
  struct Mark {
    Kind kind;
    size_t param;  // kReady: the parameter's place in backward order
    double host;   // SteadySeconds()
    void* event;   // on a GPU rank
  };
  void Add(Kind kind, size_t param = 0);
  double Between(const Mark& a, const Mark& b) const;

  Model* model_;
  GradientReadyHook* inner_;
  void* stream_;
  std::vector<Parameter*> order_;  // backward order
  std::unordered_map<const Parameter*, size_t> index_of_;  // a parameter's place in order_
  bool in_last_ = false;
  std::vector<Mark> marks_;    // this step's
  std::vector<void*> events_;  // reused step after step
  size_t events_used_ = 0;
  // Per timed step.
  std::vector<double> steps_, forwards_, backwards_, last_backwards_;
  std::vector<std::vector<double>> readies_;  // [param][timed step]
};

// --profile-file: what the scaling model reads besides the timings.
struct ProfileRun {
  std::string model, device, precision;
  std::string peer_access;  // the GPU peer-access decision's state ("" on CPU ranks)
  int world_size = 1, threads = 1;
  int64_t accumulation_steps = 1, samples_per_step = 0, batch_size = 0, image_size = 0, seq_len = 0;
};

// Writes the profiler's medians over the timed steps to `path`,
// atomically; a run with no timed step is refused, naming the flag.
Status WriteStepProfile(const std::string& path, const StepProfiler& profiler, const ProfileRun& run);

}  // namespace ddp
