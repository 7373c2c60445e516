// Model: a root layer plus everything a trainer needs around it. All
// parameters live in one flat buffer and all gradients in another, with each
// Parameter's value and grad a named view at its offset (llm.c's layout), so
// buckets and ZeRO shards are plain offset ranges.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/layers/layer.h"
#include "runtime/layers/loss_module.h"
#include "runtime/status.h"

namespace ddp {

class Model;

// The parameters overlapping [offset, offset + numel) of `model`'s flat
// parameter space, in order: `fn(param, param_offset, range_offset,
// length)`, the overlap starting at `param_offset` in the parameter and
// `range_offset` in the range.
void ForEachParameterIn(const Model& model, int64_t offset, int64_t numel,
                        const std::function<void(const Parameter& param, int64_t param_offset, int64_t range_offset,
                                                 int64_t length)>& fn);

class Model {
 public:
  // Names every parameter and buffer, allocates the flat buffers and
  // initializes with `seed`. On the meta device (`device`) the flat buffers
  // and every buffer are meta tensors from the start, and nothing is
  // initialized: a plan of bert-large reads and writes no 1.3 GB.
  Model(std::string name, std::unique_ptr<Layer> root, uint64_t seed, Device device = Device::Cpu());

  const std::string& name() const { return name_; }
  // With low precision enabled, an f32 input is first rounded to the
  // compute dtype: activations are 16-bit from the first layer on; with
  // channels-last, a contiguous 4-D input is converted at this edge too.
  Tensor Forward(ExecutionContext& ctx, const Tensor& x);
  // Channels-last (NHWC) activations from the input on (off by default).
  void set_channels_last(bool channels_last) { channels_last_ = channels_last; }
  bool channels_last() const { return channels_last_; }
  // Backward from the output gradient. With `accumulate`, gradients add to
  // what earlier micro-batches left; otherwise they are overwritten. Returns
  // the input gradient when set_needs_input_grad(true) (tests), else an
  // undefined tensor.
  Tensor Backward(ExecutionContext& ctx, const Tensor& dy, bool accumulate);
  void set_needs_input_grad(bool needs) { root_->set_needs_input_grad(needs); }
  // The loss, from a batch of named tensors: a LossModule root (BERT) runs
  // its own; a plain root (ResNet) runs on the batch's
  // output_loss->input_name() tensor (through Forward's conversions), and
  // the OutputLoss set here turns its output into the loss. Returns the
  // micro-batch's mean loss and, in evaluation, its counts. Backward starts
  // from the loss gradient, gradients added to earlier micro-batches' with
  // `accumulate`. The trainer only ever calls these.
  void set_output_loss(std::unique_ptr<OutputLoss> loss) { output_loss_ = std::move(loss); }
  bool has_loss() const { return loss_module_ != nullptr || output_loss_ != nullptr; }
  LossResult ForwardLoss(ExecutionContext& ctx, const Batch& batch);
  void BackwardLoss(ExecutionContext& ctx, double loss_grad, bool accumulate);
  // The same forward with the loss's figures left on the device (a CUDA
  // graph's step): `stats` is f64 [loss_stats_size()], read by ReadLoss
  // once the work ran. loss_stats_size() is 0 where the loss cannot.
  int64_t loss_stats_size() const;
  void ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats);
  LossResult ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch);
  // Why a training step cannot be captured into a graph and replayed, or ""
  // (LossModule::CaptureBlocker; an image classifier's step always can).
  std::string CaptureBlocker() const;
  void SetTraining(bool training) { root_->SetTraining(training); }
  // Installs (or with null, removes) the hook fired as each gradient is final.
  void SetGradientReadyHook(GradientReadyHook* hook) { backward_state_.hook = hook; }
  GradientReadyHook* gradient_ready_hook() const { return backward_state_.hook; }

  // In registration (state_dict) order.
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  // The order in which backward finishes gradients: the reverse.
  std::vector<Parameter*> BackwardOrder() const;
  const std::vector<Buffer*>& buffers() const { return buffers_; }
  int64_t num_parameters() const { return num_parameters_; }
  // Undefined while ZeRO holds the master weights in shards
  // (ReleaseFlatParameters).
  Tensor& flat_parameters() { return flat_parameters_; }
  // For owners that keep the f32 master weights elsewhere (ZeRO's shards):
  // frees the flat parameter buffer. In f32 training every value is then
  // undefined (ZeRO-3 points each into a gathered bucket while in use).
  // With low precision and `keep_working_copy` the 16-bit copy is the
  // working copy (made by EnsureLowPrecisionCopy where MoveParts left it
  // to the owner), and the parameters the forward reads in f32
  // (Parameter::forward_reads_f32) keep their values, moved (on `ctx`)
  // into a buffer of their own, the working copy's f32 part; the owner
  // keeps them current. Without (ZeRO-3) the 16-bit copy goes too, and the
  // owner points each parameter's value and copy at gathered buffers.
  void ReleaseFlatParameters(ExecutionContext& ctx, bool keep_working_copy = true);
  // Makes `flat` (f32, num_parameters() elements, on the model's device)
  // the flat parameter buffer again, every value a view into it (the f32
  // part of the working copy is dropped: `flat` holds the same values).
  // With low precision a released 16-bit copy is made again from it (on
  // `ctx`).
  void AdoptFlatParameters(ExecutionContext& ctx, Tensor flat);
  // Undefined after ReleaseFlatGradients.
  Tensor& flat_gradients() { return flat_gradients_; }
  // For owners that re-point every parameter's grad into buffers of their
  // own (ZeRO's padded buckets): frees the flat gradient buffer.
  void ReleaseFlatGradients();
  // Moves the flat buffers and every buffer (BN statistics) to `device`,
  // values kept, gradients zeroed, views re-pointed. Before any reducer or
  // optimizer takes views of them.
  //
  // For an owner that keeps the f32 master weights in shards (ZeRO) and
  // takes them from here: without `parameters` the flat parameters stay
  // where they are (the host) until ReleaseFlatParameters, and a 16-bit
  // copy waits for EnsureLowPrecisionCopy; without `gradients` no flat
  // gradient buffer is made. The device then never holds the whole model.
  struct MoveParts {
    bool parameters = true, gradients = true;
  };
  void MoveTo(Device device, MoveParts parts);
  void MoveTo(Device device) { MoveTo(device, MoveParts()); }
  // Whether the flat parameters stayed behind on the host (MoveParts).
  bool parameters_on_host() const {
    return flat_parameters_.defined() && flat_parameters_.device() != device_;
  }
  Device device() const { return device_; }

  // Mixed precision: keeps a `dtype` (bf16 or f16) copy of every parameter
  // in one flat buffer laid out like the f32 one (Parameter::low views it),
  // which convolutions and GEMMs read; activations take that dtype. The f32
  // buffer stays the master copy that optimizers update. Call after MoveTo;
  // the copy is filled here (on `ctx`) and by each RefreshLowPrecision.
  // With `weights_format` channels-last, the copy of each 4-D weight is laid
  // out [K, R, S, C] within its region (cuDNN's channels-last convolutions
  // want weights so); the master weights stay [K, C, R, S].
  void EnableLowPrecision(ExecutionContext& ctx, DType dtype,
                          MemoryFormat weights_format = MemoryFormat::kContiguous);
  // The 16-bit copy made (under low precision, where it is not): filled
  // from the flat parameters where they are defined, else left for the
  // owner of the shards to gather. Not while the flat parameters are on the
  // host (MoveParts): their owner shards them first.
  void EnsureLowPrecisionCopy(ExecutionContext& ctx);
  // The working copy's bytes besides the flat f32 parameters: the 16-bit
  // copy, and while the flat buffer is released, the f32 values the forward
  // reads (0 in f32 training).
  int64_t low_precision_bytes() const {
    return (flat_low_.defined() ? static_cast<int64_t>(flat_low_.nbytes()) : 0) +
           (f32_reads_.defined() ? static_cast<int64_t>(f32_reads_.nbytes()) : 0);
  }
  // f32 unless EnableLowPrecision was called.
  DType compute_dtype() const { return low_dtype_; }
  // The layout of `p`'s 16-bit copy (EnableLowPrecision's weights_format
  // for 4-D weights).
  MemoryFormat LowPrecisionFormat(const Parameter& p) const {
    return p.shape.size() == 4 ? low_format_ : MemoryFormat::kContiguous;
  }
  // Rounds the master weights into the low-precision copy (after each
  // optimizer step and anything else that writes the master weights), all
  // of them or the `numel` from flat `offset` on (a ZeRO bucket as it
  // arrives, whole parameters); a no-op in f32 training.
  void RefreshLowPrecision(ExecutionContext& ctx);
  void RefreshLowPrecision(ExecutionContext& ctx, int64_t offset, int64_t numel);
  // The same range of the copy from `source`: those `numel` values already
  // rounded, in the compute dtype and the flat (master) layout (ZeRO
  // gathers the owners' rounded pieces so).
  void RefreshLowPrecisionFrom(ExecutionContext& ctx, int64_t offset, int64_t numel, const Tensor& source);

  // Every parameter and buffer under its PyTorch name, in state_dict order,
  // with a loss module's tied duplicates (BERT's decoder) where PyTorch's
  // state_dict holds them. The tensors are the live ones, not copies.
  std::vector<std::pair<std::string, Tensor>> StateDict() const;
  // The same entries by where their values live: a parameter (whose value
  // may be held in shards elsewhere: ZeRO), or else a buffer's tensor.
  struct StateSource {
    std::string name;
    const Parameter* param = nullptr;
    Tensor buffer;
  };
  std::vector<StateSource> StateSources() const;
  // Strict, like torch's load_state_dict(strict=True): every name present,
  // none extra, shapes and dtypes equal. On error nothing is changed, and the
  // message names the first offending tensor. A loss module's tied
  // duplicates may be present (equal to what they repeat) or absent, and its
  // older spellings are accepted (LossModule::CanonicalStateName).
  // A loss module may also let tensors of another model's checkpoint be
  // dropped and its own new ones keep their initialization (fine-tuning):
  // `report` lists both.
  struct LoadReport {
    std::vector<std::string> dropped, fresh;
  };
  Status LoadStateDict(const std::vector<std::pair<std::string, Tensor>>& tensors, LoadReport* report = nullptr);

 private:
  std::string name_;
  std::unique_ptr<Layer> root_;
  LossModule* loss_module_ = nullptr;  // root_, when it is one
  std::string loss_name_;              // "<name> loss", what names its activations
  std::unique_ptr<OutputLoss> output_loss_;  // otherwise
  std::vector<Parameter*> parameters_;
  std::vector<Buffer*> buffers_;
  // The refreshes: from the f32 master, or from a rounded `source`.
  void Refresh(ExecutionContext& ctx, int64_t offset, int64_t numel, const Tensor* source);
  Tensor flat_parameters_, flat_gradients_, flat_low_;
  Tensor f32_reads_;  // with low precision, while flat_parameters_ is released
  DType low_dtype_ = DType::kF32;
  MemoryFormat low_format_ = MemoryFormat::kContiguous;
  // flat_low_, each parameter's copy a view into it.
  void AllocateLowPrecisionCopy();
  int64_t num_parameters_ = 0;
  Device device_;
  bool channels_last_ = false;
  BackwardState backward_state_;
};

}  // namespace ddp
