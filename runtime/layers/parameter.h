// Parameters, buffers and the gradient-ready hook: what layers expose to
// optimizers, checkpoints and communication, without knowing about them.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace ddp {

struct Parameter {
  std::string name;  // full PyTorch name, e.g. "layer1.0.conv1.weight"
  Shape shape;
  Tensor value;  // f32 master weights: a view into the model's flat parameter buffer
  // Mixed precision: the 16-bit copy that forward and backward read for
  // convolutions and GEMMs, a view into the model's flat low-precision
  // buffer, refreshed from `value` once per step. Undefined in f32 training.
  Tensor low;
  // Where backward writes this parameter's gradient: a view into the model's
  // flat gradient buffer, which a reducer may re-point into its buckets.
  Tensor grad;
  // Biases and normalization weights: what --no-decay-bn-bias exempts from
  // weight decay.
  bool is_bias_or_norm = false;
  // Whether forward reads the f32 `value` even in mixed precision (batch and
  // layer norm, embedding tables, the biases of f32-output linears) rather
  // than `low`: ZeRO's 16-bit parameter gather sends these in f32 too.
  // Biases and norms by default; layers set it otherwise.
  bool forward_reads_f32 = false;
};

// Model state that is not trained by gradients (BN running statistics).
struct Buffer {
  std::string name;
  Tensor value;
};

// Called by a layer as soon as a parameter's gradient for the current
// backward pass is final. comm's Reducer implements it to start all-reducing
// a bucket while backward continues (Caffe's callback idea).
class GradientReadyHook {
 public:
  virtual ~GradientReadyHook() = default;
  // Called before a layer's forward, and again before its backward, reads
  // `param`'s value: where parameters may still be arriving (ZeRO's
  // all-gather of the updated pieces, which overlaps the next forward) or
  // are gathered only for their use (ZeRO-3), the hook makes param's
  // bucket current here.
  virtual void PrepareParameter(const Parameter& param) { (void)param; }
  // Called before a layer writes `param`'s gradient in this backward pass:
  // where gradient buffers are transient (ZeRO-2), the hook points
  // param.grad at a free one here.
  virtual void PrepareGradient(Parameter& param) { (void)param; }
  virtual void MarkGradientReady(Parameter& param) = 0;
};

// Shared by every layer of a model: the hook (also asked before forward
// reads parameters) and how the current backward pass writes gradients.
struct BackwardState {
  // Later micro-batches of an accumulated step add into the gradients; the
  // first overwrites them.
  bool accumulate = false;
  GradientReadyHook* hook = nullptr;
};

}  // namespace ddp
