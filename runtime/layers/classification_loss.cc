#include "runtime/layers/classification_loss.h"

namespace ddp {

SoftmaxClassificationLoss::SoftmaxClassificationLoss(double label_smoothing) {
  params_.label_smoothing = label_smoothing;
}

void SoftmaxClassificationLoss::PrepareTraining(const Tensor& logits, const Batch& batch) {
  if (!probs_.defined() || probs_.shape() != logits.shape() || probs_.device() != logits.device()) {
    probs_ = Tensor::Empty(logits.shape(), DType::kF32, logits.device());
    dlogits_ = Tensor::Empty(logits.shape(), DType::kF32, logits.device());
  }
  labels_ = batch.Get("labels");
}

LossResult SoftmaxClassificationLoss::Forward(ExecutionContext& ctx, const Tensor& logits, const Batch& batch,
                                              bool training) {
  LossResult result;
  if (training) {
    PrepareTraining(logits, batch);
    result.loss = SoftmaxCrossEntropyForward(ctx, params_, logits, labels_, probs_).loss;
    return result;
  }
  const Tensor& labels = batch.Get("labels");
  Tensor probs = Tensor::Empty(logits.shape(), DType::kF32, logits.device());
  result.loss = SoftmaxCrossEntropyForward(ctx, params_, logits, labels, probs).loss;
  const CorrectCount top1 = CountCorrect(logits, labels, params_.ignore_index);
  result.counts = {EvalCount{"top1", "accuracy", top1.correct, top1.counted}};
  return result;
}

void SoftmaxClassificationLoss::ForwardToDevice(ExecutionContext& ctx, const Tensor& logits, const Batch& batch,
                                                Tensor& stats) {
  PrepareTraining(logits, batch);
  SoftmaxCrossEntropyForwardToDevice(ctx, params_, logits, labels_, probs_, stats);
}

LossResult SoftmaxClassificationLoss::Read(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
  const Tensor& labels = batch.Get("labels");
  LossResult result;
  result.loss = CrossEntropyResultOf(ctx, stats, labels, probs_.dim(1)).loss;
  return result;
}

const Tensor& SoftmaxClassificationLoss::Backward(ExecutionContext& ctx, double loss_grad) {
  CHECK(probs_.defined()) << "classification loss backward before a training forward";
  SoftmaxCrossEntropyBackward(ctx, params_, probs_, labels_, loss_grad, dlogits_);
  return dlogits_;
}

}  // namespace ddp
