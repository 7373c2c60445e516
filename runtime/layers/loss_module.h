// A model that runs its own loss: it takes a batch of named tensors and
// returns the micro-batch's mean loss and its evaluation counts, and its
// backward starts from the loss (DESIGN.md, "Models and batches"). The
// trainer scales the loss gradient for accumulation and ranks, and never
// asks which model runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/layers/layer.h"

namespace ddp {

// Named tensors on the rank's device (DESIGN.md's names: "images",
// "labels"; "input_ids", "token_type_ids", "attention_mask", "labels",
// "next_sentence_label"), and where the batch sits in the run: the
// optimizer step and the global index of its first sample (dropout masks
// depend on both, never on the rank).
struct Batch {
  std::vector<std::pair<std::string, Tensor>> tensors;
  int64_t step = 0;
  int64_t first_sample = 0;

  // Null when absent.
  const Tensor* Find(const std::string& name) const {
    for (const auto& [n, t] : tensors) {
      if (n == name) return &t;
    }
    return nullptr;
  }
  const Tensor& Get(const std::string& name) const {
    const Tensor* t = Find(name);
    CHECK(t != nullptr) << "the batch has no tensor '" << name << "'";
    return *t;
  }
};

// Correct predictions of one kind, and how many were counted (top-1 of
// images; BERT's masked tokens and next-sentence pairs).
struct EvalCount {
  std::string name;
  int64_t correct = 0;
  int64_t counted = 0;
};

struct LossResult {
  double loss = 0.0;  // the micro-batch's mean loss (for BERT, MLM + NSP)
  std::vector<EvalCount> counts;
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
  // BackwardLoss needs.
  virtual LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch) = 0;
  // Backward from d(total)/d(loss) = loss_grad.
  virtual void BackwardLoss(ExecutionContext& ctx, double loss_grad) = 0;

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

}  // namespace ddp
