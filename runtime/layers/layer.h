// Layer: an explicit Forward/Backward module (Caffe style). Public
// non-virtual Forward and Backward dispatch to the per-layer implementations.
//
// Contracts:
// - Forward keeps what Backward needs; Backward releases it.
// - Backward never modifies `dy`; it returns the input gradient, or an
//   undefined tensor when the layer's input needs none.
// - A layer writes each parameter's gradient through GradientTarget and
//   FinishGradient, in reverse registration order, so the model's backward
//   order of parameters is the reverse of its registration order.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/execution_context.h"
#include "runtime/layers/parameter.h"
#include "runtime/tensor.h"

namespace ddp {

class Layer {
 public:
  virtual ~Layer() = default;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  Tensor Forward(ExecutionContext& ctx, const Tensor& x);
  Tensor Backward(ExecutionContext& ctx, const Tensor& dy);

  // Training mode (batch statistics) or evaluation mode, for the whole subtree.
  void SetTraining(bool training);
  bool training() const { return training_; }
  // Activation checkpointing: a checkpointed layer keeps only its input in
  // a training forward (nothing in its subtree keeps anything) and
  // recomputes its forward, keeping activations, before its backward.
  // Dropout masks and batch statistics come out the same; batch norm
  // updates its running statistics once.
  void set_checkpointing(bool checkpointing) { checkpointing_ = checkpointing; }
  // For the whole subtree: without `keep_for_backward` a training forward
  // keeps nothing for backward; `recomputing` is a checkpointed layer's
  // second forward, in which batch norm leaves its running statistics as
  // the first one left them.
  void SetCheckpointMode(bool keep_for_backward, bool recomputing);
  // Whether this forward keeps what backward needs.
  bool keeps_for_backward() const { return training_ && keep_for_backward_; }
  bool recomputing() const { return recomputing_; }
  // Whether Backward must produce the input gradient (false for the first
  // layer of a model, whose input is data).
  void set_needs_input_grad(bool needs) { needs_input_grad_ = needs; }
  bool needs_input_grad() const { return needs_input_grad_; }

  // This subtree's parameters and buffers in registration order, which is
  // PyTorch's state_dict order. Names are full once the model is finalized.
  void CollectParameters(std::vector<Parameter*>* out);
  void CollectBuffers(std::vector<Buffer*>* out);
  // (name, tensor) of every parameter and buffer in PyTorch's state_dict
  // order: a module's parameters, then its buffers, then its children.
  void CollectState(std::vector<std::pair<std::string, Tensor>>* out);
  // The layer's full name ("layer1.0.conv1"; the model's root "model"),
  // for the timeline.
  const std::string& name() const { return name_; }
  // Sets full names: `prefix` + local names joined by '.'.
  void AssignNames(const std::string& prefix);
  void SetBackwardState(BackwardState* state);
  // Fills this subtree's parameters (and resets buffers) with their initial
  // values; the values are already allocated.
  void ResetParameters(std::mt19937_64& rng);

 protected:
  virtual Tensor ForwardImpl(ExecutionContext& ctx, const Tensor& x) = 0;
  virtual Tensor BackwardImpl(ExecutionContext& ctx, const Tensor& dy) = 0;
  // Initializes this layer's own parameters (children are visited separately).
  virtual void ResetOwnParameters(std::mt19937_64& rng) { (void)rng; }

  // What Forward does before ForwardImpl (the backward hook's per-parameter
  // preparation), for layers with forwards (and backwards) of their own
  // beyond Forward; Backward does it too unless backward_reads_parameters()
  // is false. PrepareParameter does it for one parameter, also another
  // layer's (a tied decoder's weights).
  void PrepareForward();
  void PrepareParameter(const Parameter& p);
  virtual bool backward_reads_parameters() const { return true; }

  // The weights a convolution or GEMM reads for input `x`: the master
  // weights for f32 input, the low-precision copy for 16-bit input.
  static const Tensor& WeightsFor(const Parameter& p, const Tensor& x);

  Parameter* AddParameter(const std::string& local_name, const Shape& shape, bool is_bias_or_norm);
  Buffer* AddBuffer(const std::string& local_name, Tensor value);
  template <typename L, typename... Args>
  L* AddChild(const std::string& local_name, Args&&... args) {
    auto child = std::make_unique<L>(std::forward<Args>(args)...);
    L* raw = child.get();
    children_.push_back({local_name, std::move(child)});
    return raw;
  }

  // The tensor to write `p`'s freshly computed gradient into: p.grad itself,
  // or a staging buffer when accumulating. Pass it to FinishGradient.
  Tensor GradientTarget(ExecutionContext& ctx, Parameter& p);
  // Moves `computed` into p.grad (added when accumulating, copied otherwise;
  // nothing when it is p.grad itself), then fires the hook.
  void FinishGradient(ExecutionContext& ctx, Parameter& p, const Tensor& computed);

 private:
  struct Named {
    std::string name;
    std::unique_ptr<Layer> layer;
  };
  struct OwnParameter {
    std::string local_name;
    std::unique_ptr<Parameter> param;
  };
  struct OwnBuffer {
    std::string local_name;
    std::unique_ptr<Buffer> buffer;
  };

  std::vector<OwnParameter> params_;
  std::vector<OwnBuffer> buffers_;
  std::vector<Named> children_;
  std::string name_ = "model";
  bool training_ = true;
  bool keep_for_backward_ = true;
  bool recomputing_ = false;
  bool checkpointing_ = false;
  Tensor checkpoint_input_;
  bool needs_input_grad_ = true;
  BackwardState* backward_state_ = nullptr;
};

}  // namespace ddp
