// A model that runs its own loss: it takes a batch of named tensors and
// returns the micro-batch's mean loss and its evaluation counts, and its
// backward starts from the loss (DESIGN.md, "Models and batches"). The
// trainer scales the loss gradient for accumulation and ranks, and never
// asks which model runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/batch.h"
#include "runtime/layers/layer.h"

namespace ddp {

// Correct predictions of one kind, and how many were counted (top-1 of
// images; BERT's masked tokens and next-sentence pairs).
struct EvalCount {
  std::string name;
  std::string label;  // for people: "accuracy", "MLM accuracy"
  int64_t correct = 0;
  int64_t counted = 0;
};

struct LossResult {
  double loss = 0.0;  // the micro-batch's mean loss (for BERT, MLM + NSP)
  std::vector<EvalCount> counts;
  // Evaluation's results per sample, where the model has them (question
  // answering: each feature's best span): host f64 [N, K], rows in the
  // batch's order.
  Tensor sample_outputs;
};

// A second name under which a checkpoint holds one of the model's tensors
// (a tied weight): saved under `name` after the entry `after`, and on
// loading accepted when it equals `target`, or absent.
struct StateAlias {
  std::string name, target, after;
};

class LossModule : public Layer {
 public:
  virtual std::vector<StateAlias> StateAliases() const { return {}; }
  // A name from a checkpoint in this build's terms (older spellings), or ""
  // for a tensor this build rebuilds rather than loads.
  virtual std::string CanonicalStateName(const std::string& name) const { return name; }
  // Loading another model's checkpoint (fine-tuning from pretraining): a
  // tensor the file has and this model lacks may be dropped, one this
  // model has and the file lacks may keep its fresh initialization;
  // anything else missing or extra is an error.
  enum class LoadPolicy { kStrict, kDropIfPresent, kNewIfAbsent };
  virtual LoadPolicy PolicyOnLoad(const std::string& name) const {
    (void)name;
    return LoadPolicy::kStrict;
  }

  // Forward through the model and its loss; in training mode keeps what
  // BackwardLoss needs, in evaluation mode returns the counts (training
  // leaves them out: they cost a copy to the host).
  virtual LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch) = 0;
  // Backward from d(total)/d(loss) = loss_grad.
  virtual void BackwardLoss(ExecutionContext& ctx, double loss_grad) = 0;

  // A step that must not wait for the host (a CUDA graph) runs the loss
  // with its figures left on the device: ForwardLossToDevice writes them to
  // `stats` (f64 [loss_stats_size()] on ctx's device), and ReadLoss turns
  // them into the LossResult later, on the host. 0: not supported.
  virtual int64_t loss_stats_size() const { return 0; }
  virtual void ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) {
    (void)ctx, (void)batch, (void)stats;
    LOG(FATAL) << "this model's loss runs on the host";
  }
  virtual LossResult ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
    (void)ctx, (void)stats, (void)batch;
    LOG(FATAL) << "this model's loss runs on the host";
    return LossResult();
  }
  // Why a training step of this module, as now configured, cannot be
  // captured once and replayed ("" when it can): a kernel argument that
  // changes from step to step.
  virtual std::string CaptureBlocker() const { return ""; }

 protected:
  Tensor ForwardImpl(ExecutionContext&, const Tensor&) override {
    LOG(FATAL) << "a loss module runs through ForwardLoss";
    return Tensor();
  }
  Tensor BackwardImpl(ExecutionContext&, const Tensor&) override {
    LOG(FATAL) << "a loss module runs through BackwardLoss";
    return Tensor();
  }
};

// The loss of a network whose root is a plain layer (an image classifier:
// images in, logits out): the model runs the root on the batch's
// input_name() tensor, and this turns the output and the batch into the
// loss and, backward, the output's gradient. The same device-side variant
// as LossModule's.
class OutputLoss {
 public:
  virtual ~OutputLoss() = default;
  virtual const char* input_name() const = 0;
  // In training mode keeps what Backward needs; evaluation counts may be
  // left out in training (they would cost a copy to the host).
  virtual LossResult Forward(ExecutionContext& ctx, const Tensor& output, const Batch& batch, bool training) = 0;
  virtual int64_t stats_size() const = 0;
  virtual void ForwardToDevice(ExecutionContext& ctx, const Tensor& output, const Batch& batch, Tensor& stats) = 0;
  virtual LossResult Read(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) = 0;
  // loss_grad * d(loss)/d(output), from the last training Forward; valid
  // until the next one.
  virtual const Tensor& Backward(ExecutionContext& ctx, double loss_grad) = 0;
};

}  // namespace ddp
