// Image classification's loss: softmax cross-entropy of the network's
// logits against the batch's "labels" (torch.nn.CrossEntropyLoss, with
// label smoothing), and top-1 accuracy in evaluation. The network reads the
// batch's "images".
#pragma once

#include "runtime/layers/loss_module.h"
#include "runtime/ops/loss.h"

namespace ddp {

class SoftmaxClassificationLoss : public OutputLoss {
 public:
  explicit SoftmaxClassificationLoss(double label_smoothing);

  const char* input_name() const override { return "images"; }
  // Training keeps the probabilities in buffers that stay while the batch
  // shape does (a captured CUDA graph holds their addresses); evaluation
  // uses buffers of its own.
  LossResult Forward(ExecutionContext& ctx, const Tensor& logits, const Batch& batch, bool training) override;
  int64_t stats_size() const override { return 3; }
  void ForwardToDevice(ExecutionContext& ctx, const Tensor& logits, const Batch& batch, Tensor& stats) override;
  LossResult Read(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) override;
  const Tensor& Backward(ExecutionContext& ctx, double loss_grad) override;

 private:
  // Sized for `logits` (kept while the shape holds).
  void PrepareTraining(const Tensor& logits, const Batch& batch);

  CrossEntropyParams params_;
  Tensor probs_, dlogits_, labels_;
};

}  // namespace ddp
