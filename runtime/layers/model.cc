#include "runtime/layers/model.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "runtime/ops/elementwise.h"

namespace ddp {
namespace {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

NamedTensors::iterator FindNamed(NamedTensors& tensors, const std::string& name) {
  return std::find_if(tensors.begin(), tensors.end(), [&](const auto& entry) { return entry.first == name; });
}

}  // namespace

Model::Model(std::string name, std::unique_ptr<Layer> root, uint64_t seed, Device device)
    : name_(std::move(name)), root_(std::move(root)) {
  CHECK(device.is_cpu() || device.is_meta()) << "a model is made on the host (or the meta device), not " << device.ToString();
  loss_module_ = dynamic_cast<LossModule*>(root_.get());
  loss_name_ = name_ + " loss";
  root_->AssignNames("");
  root_->CollectParameters(&parameters_);
  root_->CollectBuffers(&buffers_);
  root_->SetBackwardState(&backward_state_);
  root_->set_needs_input_grad(false);  // the model's input is data
  int64_t total = 0;
  for (const Parameter* p : parameters_) total += NumElements(p->shape);
  num_parameters_ = total;
  device_ = device;
  flat_parameters_ = Tensor::Zeros({total}, DType::kF32, device);
  flat_gradients_ = Tensor::Zeros({total}, DType::kF32, device);
  int64_t offset = 0;
  for (Parameter* p : parameters_) {
    p->value = flat_parameters_.View(offset, p->shape);
    p->grad = flat_gradients_.View(offset, p->shape);
    offset += NumElements(p->shape);
  }
  if (device.is_meta()) {
    for (Buffer* b : buffers_) b->value = b->value.To(device);
    return;
  }
  std::mt19937_64 rng(seed);
  root_->ResetParameters(rng);
}

Tensor Model::Forward(ExecutionContext& ctx, const Tensor& x) {
  const bool convert_format = channels_last_ && x.ndim() == 4 && !x.channels_last();
  const bool convert_dtype = x.dtype() == DType::kF32 && compute_dtype() != DType::kF32;
  if (!convert_format && !convert_dtype) return root_->Forward(ctx, x);
  Tensor input = Tensor::Empty(x.shape(), convert_dtype ? compute_dtype() : x.dtype(), x.device(),
                               convert_format ? MemoryFormat::kChannelsLast : x.format());
  if (convert_format) {
    ConvertLayout(ctx, x, input);
  } else {
    CastScaled(ctx, x, 1.0f, input);
  }
  return root_->Forward(ctx, input);
}

void Model::EnableLowPrecision(ExecutionContext& ctx, DType dtype, MemoryFormat weights_format) {
  CHECK(dtype == DType::kBF16 || dtype == DType::kF16) << "low precision is bf16 or f16, not " << DTypeName(dtype);
  low_dtype_ = dtype;
  low_format_ = weights_format;
  // Master weights left on the host: the owner of their shards makes the
  // copy (EnsureLowPrecisionCopy), where the stage keeps one whole.
  if (!parameters_on_host()) EnsureLowPrecisionCopy(ctx);
}

void Model::EnsureLowPrecisionCopy(ExecutionContext& ctx) {
  if (low_dtype_ == DType::kF32 || flat_low_.defined()) return;
  // Masters left on the host are sharded (and freed) before anyone asks.
  CHECK(!parameters_on_host()) << name_ << ": a 16-bit copy of master weights still on the host";
  AllocateLowPrecisionCopy();
  if (flat_parameters_.defined()) RefreshLowPrecision(ctx);
}

void Model::AllocateLowPrecisionCopy() {
  flat_low_ = Tensor::Empty({num_parameters_}, low_dtype_, device_);
  int64_t offset = 0;
  for (Parameter* p : parameters_) {
    p->low = flat_low_.View(offset, p->shape, LowPrecisionFormat(*p));
    offset += NumElements(p->shape);
  }
}

void Model::RefreshLowPrecision(ExecutionContext& ctx) { RefreshLowPrecision(ctx, 0, num_parameters_); }

void Model::RefreshLowPrecision(ExecutionContext& ctx, int64_t offset, int64_t numel) {
  Refresh(ctx, offset, numel, nullptr);
}

void Model::RefreshLowPrecisionFrom(ExecutionContext& ctx, int64_t offset, int64_t numel, const Tensor& source) {
  CHECK(source.numel() == numel && source.dtype() == compute_dtype())
      << "low-precision refresh of " << numel << " values from " << source.DebugString();
  Refresh(ctx, offset, numel, &source);
}

void Model::Refresh(ExecutionContext& ctx, int64_t offset, int64_t numel, const Tensor* source) {
  if (low_dtype_ == DType::kF32) return;
  CHECK(flat_low_.defined()) << name_ << ": a low-precision refresh of a 16-bit copy that is held in shards";
  CHECK(source != nullptr || flat_parameters_.defined())
      << name_ << ": a low-precision refresh from master weights that are held in shards";
  // The values at flat [begin, end): from the master (f32) or `source`.
  auto from = [&](int64_t begin, const Shape& shape) {
    return source != nullptr ? source->View(begin - offset, shape) : flat_parameters_.View(begin, shape);
  };
  // Runs of parameters laid out alike are one cast (or copy); a rearranged
  // weight is converted on its own.
  int64_t run_start = offset, at = 0;
  auto flush_run = [&](int64_t end) {
    if (end <= run_start) return;
    Tensor low = flat_low_.View(run_start, {end - run_start});
    const Tensor values = from(run_start, {end - run_start});
    if (source != nullptr) {
      Copy(ctx, values, low);
    } else {
      CastScaled(ctx, values, 1.0f, low);
    }
  };
  for (Parameter* p : parameters_) {
    const int64_t size = NumElements(p->shape), begin = at;
    at += size;
    if (!p->low.channels_last() || at <= offset || begin >= offset + numel) continue;
    CHECK(begin >= offset && at <= offset + numel)
        << p->name << ": a low-precision refresh must cover rearranged weights whole";
    flush_run(begin);
    ConvertLayout(ctx, from(begin, p->shape), p->low);
    run_start = at;
  }
  flush_run(offset + numel);
}

Tensor Model::Backward(ExecutionContext& ctx, const Tensor& dy, bool accumulate) {
  backward_state_.accumulate = accumulate;
  return root_->Backward(ctx, dy);
}

LossResult Model::ForwardLoss(ExecutionContext& ctx, const Batch& batch) {
  // Tensors a loss makes outside its layers' Forward (a head's logits) are
  // activations too.
  const ActivationScope activations(loss_name_, "forward");
  if (loss_module_ != nullptr) return loss_module_->ForwardLoss(ctx, batch);
  CHECK(output_loss_ != nullptr) << name_ << " has no loss: set_output_loss";
  const Tensor output = Forward(ctx, batch.Get(output_loss_->input_name()));
  return output_loss_->Forward(ctx, output, batch, root_->training());
}

void Model::BackwardLoss(ExecutionContext& ctx, double loss_grad, bool accumulate) {
  const ActivationScope activations(loss_name_, "backward");
  if (loss_module_ != nullptr) {
    backward_state_.accumulate = accumulate;
    loss_module_->BackwardLoss(ctx, loss_grad);
    return;
  }
  CHECK(output_loss_ != nullptr) << name_ << " has no loss: set_output_loss";
  Backward(ctx, output_loss_->Backward(ctx, loss_grad), accumulate);
}

int64_t Model::loss_stats_size() const {
  if (loss_module_ != nullptr) return loss_module_->loss_stats_size();
  return output_loss_ != nullptr ? output_loss_->stats_size() : 0;
}

void Model::ForwardLossToDevice(ExecutionContext& ctx, const Batch& batch, Tensor& stats) {
  CHECK(loss_stats_size() > 0 && stats.numel() == loss_stats_size() && stats.dtype() == DType::kF64)
      << name_ << ": loss statistics " << stats.DebugString() << " for " << loss_stats_size() << " values";
  const ActivationScope activations(loss_name_, "forward");
  if (loss_module_ != nullptr) {
    loss_module_->ForwardLossToDevice(ctx, batch, stats);
    return;
  }
  const Tensor output = Forward(ctx, batch.Get(output_loss_->input_name()));
  output_loss_->ForwardToDevice(ctx, output, batch, stats);
}

std::string Model::CaptureBlocker() const {
  return loss_module_ != nullptr ? loss_module_->CaptureBlocker() : "";
}

LossResult Model::ReadLoss(ExecutionContext& ctx, const Tensor& stats, const Batch& batch) {
  CHECK(loss_stats_size() > 0) << name_ << "'s loss runs on the host";
  if (loss_module_ != nullptr) return loss_module_->ReadLoss(ctx, stats, batch);
  return output_loss_->Read(ctx, stats, batch);
}

void Model::ReleaseFlatGradients() {
  if (!flat_gradients_.defined()) return;  // never made (MoveParts)
  for (Parameter* p : parameters_) {
    CHECK(p->grad.storage() != flat_gradients_.storage()) << p->name << "'s gradient still views the flat buffer";
  }
  flat_gradients_ = Tensor();
}

void Model::ReleaseFlatParameters(ExecutionContext& ctx, bool keep_working_copy) {
  if (!keep_working_copy) {
    for (Parameter* p : parameters_) p->low = p->value = Tensor();
    flat_low_ = f32_reads_ = flat_parameters_ = Tensor();
    return;
  }
  if (low_dtype_ != DType::kF32 && flat_parameters_.defined()) {
    int64_t total = 0;
    for (const Parameter* p : parameters_) total += p->forward_reads_f32 ? NumElements(p->shape) : 0;
    f32_reads_ = Tensor::Empty({total}, DType::kF32, device_);
    int64_t at = 0;
    for (Parameter* p : parameters_) {
      if (!p->forward_reads_f32) continue;
      Tensor moved = f32_reads_.View(at, p->shape);
      if (p->value.device() == device_) {
        Copy(ctx, p->value, moved);
      } else {
        moved.CopyFrom(p->value);  // from the host (MoveParts)
      }
      p->value = moved;
      at += NumElements(p->shape);
    }
  }
  for (Parameter* p : parameters_) {
    if (!f32_reads_.defined() || !p->forward_reads_f32) p->value = Tensor();
  }
  flat_parameters_ = Tensor();
}

void Model::AdoptFlatParameters(ExecutionContext& ctx, Tensor flat) {
  CHECK(flat.numel() == num_parameters_ && flat.dtype() == DType::kF32 && flat.device() == device_)
      << name_ << ": flat parameters " << flat.DebugString();
  flat_parameters_ = std::move(flat);
  int64_t offset = 0;
  for (Parameter* p : parameters_) {
    p->value = flat_parameters_.View(offset, p->shape);
    offset += NumElements(p->shape);
  }
  f32_reads_ = Tensor();
  EnsureLowPrecisionCopy(ctx);
}

void Model::MoveTo(Device device, MoveParts parts) {
  if (device == device_) return;
  CHECK(flat_gradients_.defined()) << "Model::MoveTo after the flat gradients were released";
  CHECK(!flat_low_.defined()) << "Model::MoveTo after EnableLowPrecision";
  CHECK(flat_parameters_.defined()) << "Model::MoveTo after the flat parameters were released";
  if (parts.parameters) flat_parameters_ = flat_parameters_.To(device);
  device_ = device;
  flat_gradients_ = parts.gradients ? Tensor::Zeros({num_parameters_}, DType::kF32, device) : Tensor();
  int64_t offset = 0;
  for (Parameter* p : parameters_) {
    p->value = flat_parameters_.View(offset, p->shape);
    p->grad = parts.gradients ? flat_gradients_.View(offset, p->shape) : Tensor();
    offset += NumElements(p->shape);
  }
  for (Buffer* b : buffers_) b->value = b->value.To(device);
}

std::vector<Parameter*> Model::BackwardOrder() const {
  return std::vector<Parameter*>(parameters_.rbegin(), parameters_.rend());
}

std::vector<std::pair<std::string, Tensor>> Model::StateDict() const {
  std::vector<std::pair<std::string, Tensor>> state;
  root_->CollectState(&state);
  if (loss_module_ == nullptr) return state;
  for (const StateAlias& alias : loss_module_->StateAliases()) {
    auto target = FindNamed(state, alias.target), after = FindNamed(state, alias.after);
    CHECK(target != state.end() && after != state.end()) << "state alias " << alias.name;
    const Tensor value = target->second;
    state.insert(after + 1, {alias.name, value});
  }
  return state;
}

void ForEachParameterIn(const Model& model, int64_t offset, int64_t numel,
                        const std::function<void(const Parameter& param, int64_t param_offset, int64_t range_offset,
                                                 int64_t length)>& fn) {
  int64_t start = 0;
  for (const Parameter* p : model.parameters()) {
    const int64_t size = NumElements(p->shape);
    const int64_t a = std::max(offset, start), z = std::min(offset + numel, start + size);
    if (a < z) fn(*p, a - start, a - offset, z - a);
    start += size;
    if (start >= offset + numel) break;
  }
}

std::vector<Model::StateSource> Model::StateSources() const {
  std::map<std::string, const Parameter*> params;
  for (const Parameter* p : parameters_) params[p->name] = p;
  std::map<std::string, std::string> aliases;  // a tied duplicate -> what it repeats
  if (loss_module_ != nullptr) {
    for (const StateAlias& alias : loss_module_->StateAliases()) aliases[alias.name] = alias.target;
  }
  std::vector<StateSource> sources;
  for (const auto& [name, t] : StateDict()) {
    const auto alias = aliases.find(name);
    const auto param = params.find(alias == aliases.end() ? name : alias->second);
    if (param != params.end()) {
      sources.push_back({name, param->second, Tensor()});
    } else {
      sources.push_back({name, nullptr, t});
    }
  }
  return sources;
}

Status Model::LoadStateDict(const std::vector<std::pair<std::string, Tensor>>& file_tensors, LoadReport* report) {
  LoadReport local;
  LoadReport& r = report != nullptr ? *report : local;
  auto policy = [&](const std::string& name) {
    return loss_module_ != nullptr ? loss_module_->PolicyOnLoad(name) : LossModule::LoadPolicy::kStrict;
  };
  // Older spellings renamed, rebuilt buffers dropped; tied duplicates
  // checked against the tensor they repeat, then dropped.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : file_tensors) {
    const std::string canonical = loss_module_ != nullptr ? loss_module_->CanonicalStateName(name) : name;
    if (!canonical.empty()) tensors.emplace_back(canonical, t);
  }
  if (loss_module_ != nullptr) {
    for (const StateAlias& alias : loss_module_->StateAliases()) {
      auto repeat = FindNamed(tensors, alias.name);
      if (repeat == tensors.end()) continue;
      auto target = FindNamed(tensors, alias.target);
      if (target != tensors.end()) {
        const Tensor& a = repeat->second;
        const Tensor& b = target->second;
        if (a.shape() != b.shape() || a.dtype() != b.dtype() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0) {
          return InvalidArgument("tensor '" + alias.name + "' differs from '" + alias.target + "', to which " + name_ +
                                 " ties it");
        }
      }
      tensors.erase(repeat);
    }
  }
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : tensors) given[name] = &t;
  std::vector<std::pair<std::string, Tensor>> state;
  root_->CollectState(&state);
  std::map<std::string, bool> expected;
  r.dropped.clear();
  r.fresh.clear();
  for (const auto& [name, t] : state) {
    expected[name] = true;
    auto it = given.find(name);
    if (it == given.end() && policy(name) == LossModule::LoadPolicy::kNewIfAbsent) {
      r.fresh.push_back(name);
      continue;
    }
    if (it == given.end()) return InvalidArgument("missing tensor '" + name + "' that " + name_ + " needs");
    const Tensor& src = *it->second;
    if (src.shape() != t.shape() || src.dtype() != t.dtype()) {
      return InvalidArgument("tensor '" + name + "' is " + DTypeName(src.dtype()) + ShapeToString(src.shape()) +
                             ", " + name_ + " expects " + DTypeName(t.dtype()) + ShapeToString(t.shape()));
    }
  }
  for (const auto& [name, t] : tensors) {
    if (expected.count(name)) continue;
    if (policy(name) != LossModule::LoadPolicy::kDropIfPresent) {
      return InvalidArgument("unexpected tensor '" + name + "' that " + name_ + " lacks");
    }
    r.dropped.push_back(name);
  }
  for (const auto& [name, t] : state) {
    if (!given.count(name)) continue;  // fresh
    Tensor dst = t;
    dst.CopyFrom(*given[name]);
  }
  return Status::Ok();
}

}  // namespace ddp
