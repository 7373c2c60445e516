// Softmax cross-entropy over logits [N, C] with i64 class labels [N], as
// torch.nn.CrossEntropyLoss(reduction="mean", ignore_index, label_smoothing).
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

struct CrossEntropyParams {
  double label_smoothing = 0.0;  // in [0, 1]
  int64_t ignore_index = -100;   // samples with this label do not count
};

struct CrossEntropyResult {
  double loss = 0.0;      // mean over counted samples; NaN when none count, as in PyTorch
  int64_t counted = 0;    // samples whose label is not ignore_index
};

// Writes the softmax probabilities to `probs` ([N, C], kept for backward).
// A label outside [0, C) that is not ignore_index is fatal.
CrossEntropyResult SoftmaxCrossEntropyForward(ExecutionContext& ctx, const CrossEntropyParams& p,
                                              const Tensor& logits, const Tensor& labels, Tensor& probs);
// The same, leaving the result on ctx's device, so a step that must not
// wait for the host (a CUDA graph) can run it: `result` (f64 [3]) gets the
// counted samples' summed loss, their count, and an internal bad-label
// marker. CrossEntropyResultOf reads it on the host later (waiting for it;
// a label outside [0, C) is fatal there, naming it).
void SoftmaxCrossEntropyForwardToDevice(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                        const Tensor& labels, Tensor& probs, Tensor& result);
CrossEntropyResult CrossEntropyResultOf(ExecutionContext& ctx, const Tensor& result, const Tensor& labels,
                                        int64_t classes);
// dlogits = loss_grad * d(mean loss)/d(logits), from the forward's probs.
void SoftmaxCrossEntropyBackward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& probs,
                                 const Tensor& labels, double loss_grad, Tensor& dlogits);

// Evaluation: among the rows whose label is not `ignore_index`, how many
// have their label as the logits' first maximum. Reads logits (f32 [N, C])
// and labels (i64 [N]) on the host, copying them from a device.
struct CorrectCount {
  int64_t correct = 0;
  int64_t counted = 0;
};
CorrectCount CountCorrect(const Tensor& logits, const Tensor& labels, int64_t ignore_index = -100);

}  // namespace ddp
