// A rank's step profile: the scaling model's input (comm/scaling_model.h).
//
// Per timed step: the forward and backward time of its micro-batches, and,
// in the backward the gradient reduction overlaps (the last micro-batch's),
// when each parameter's gradient became final. Written by --profile-file as
// the medians over the timed steps, with each parameter's bytes, in backward
// order: from it the model rebuilds any bucket layout's ready times.
//
// Host clocks: on a CPU rank they time the work; on a GPU rank they time the
// launches (the model then takes compute times from elsewhere; see the
// README's scaling section).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/layers/model.h"
#include "runtime/status.h"

namespace ddp {

class StepProfiler : public GradientReadyHook {
 public:
  // Installs itself as the model's gradient-ready hook, passing every call
  // on to the hook installed before it (the reducer's), if any.
  explicit StepProfiler(Model* model);
  ~StepProfiler() override;

  void PrepareParameter(Parameter& param) override;
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

  // The medians over the timed steps, and `about` (model, batch, threads...).
  nlohmann::ordered_json ToJson(const nlohmann::ordered_json& about) const;
  Status Write(const std::string& path, const nlohmann::ordered_json& about) const;

 private:
  Model* model_;
  GradientReadyHook* inner_;
  std::vector<Parameter*> order_;  // backward order
  std::unordered_map<const Parameter*, size_t> index_of_;  // a parameter's place in order_
  // This step so far.
  double forward_ = 0.0, backward_ = 0.0, last_backward_ = 0.0, started_ = 0.0, backward_start_ = 0.0;
  bool in_last_ = false;
  std::vector<double> ready_;  // seconds after the last backward began; -1 not yet
  // Per timed step.
  std::vector<double> steps_, forwards_, backwards_, last_backwards_;
  std::vector<std::vector<double>> readies_;  // [param][timed step]
};

}  // namespace ddp
