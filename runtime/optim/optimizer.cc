#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/reduce.h"
#include "runtime/optim/cuda/optimizer_kernels.h"

namespace ddp {
namespace {

void CheckSlots(const std::vector<OptimizerSlot>& slots) {
  for (const OptimizerSlot& s : slots) {
    CHECK(s.value.dtype() == DType::kF32 && s.grad.dtype() == DType::kF32 && s.value.numel() == s.grad.numel())
        << "optimizer slot " << s.name << ": value " << s.value.DebugString() << ", grad " << s.grad.DebugString();
  }
}

// One zero f32 tensor per slot, the slot's size and on its device:
// per-element optimizer state.
std::vector<Tensor> ZeroStateFor(const std::vector<OptimizerSlot>& slots) {
  std::vector<Tensor> state;
  for (const OptimizerSlot& s : slots) state.push_back(Tensor::Zeros({s.value.numel()}, DType::kF32, s.value.device()));
  return state;
}

// The slots and their state as the CUDA kernels' chunk table, built once on
// the slots' device (slots and state never move).
class DeviceChunks {
 public:
  void Build(const std::vector<OptimizerSlot>& slots, const std::vector<Tensor>* first,
             const std::vector<Tensor>* second) {
    if (table_.defined()) return;
    std::vector<cuda::OptimizerChunk> chunks;
    for (size_t k = 0; k < slots.size(); ++k) {
      const OptimizerSlot& s = slots[k];
      for (int64_t start = 0; start < s.value.numel(); start += cuda::kOptimizerChunk) {
        cuda::OptimizerChunk c;
        c.w = s.value.data<float>() + start;
        c.g = s.grad.data<float>() + start;
        if (first != nullptr) c.m = (*first)[k].data<float>() + start;
        if (second != nullptr) c.v = (*second)[k].data<float>() + start;
        c.n = std::min(cuda::kOptimizerChunk, s.value.numel() - start);
        c.weight_decay = s.weight_decay;
        c.param = s.param_index;
        chunks.push_back(c);
      }
    }
    count_ = static_cast<int64_t>(chunks.size());
    const int64_t bytes = count_ * static_cast<int64_t>(sizeof(cuda::OptimizerChunk));
    Tensor host = Tensor::Empty({bytes}, DType::kU8);
    if (bytes > 0) std::memcpy(host.raw_data(), chunks.data(), static_cast<size_t>(bytes));
    table_ = Tensor::Empty({bytes}, DType::kU8, slots.empty() ? Device::Cpu() : slots[0].value.device());
    table_.CopyFrom(host);
  }
  const cuda::OptimizerChunk* data() const { return static_cast<const cuda::OptimizerChunk*>(table_.raw_data()); }
  int64_t size() const { return count_; }

 private:
  Tensor table_;
  int64_t count_ = 0;
};

std::vector<Tensor> Concat(std::vector<Tensor> a, const std::vector<Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t StateBytes(const std::vector<Tensor>& state) {
  int64_t bytes = 0;
  for (const Tensor& t : state) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<OptimizerSlot> slots, const SgdOptions& options) : slots_(std::move(slots)), options_(options) {
    CheckSlots(slots_);
    if (options_.momentum != 0.0f) momentum_ = ZeroStateFor(slots_);
  }

  Status Step(ExecutionContext& ctx, float lr) override {
    const float m = options_.momentum;
    const bool first = steps_ == 0;
    if (ctx.device().is_cuda()) {
      chunks_.Build(slots_, m != 0.0f ? &momentum_ : nullptr, nullptr);
      DDP_ON_CUDA("Sgd::Step", cuda::SgdStep(ctx, chunks_.data(), chunks_.size(), lr, m, options_.nesterov, first));
      ++steps_;
      return Status::Ok();
    }
    CheckOnCpu(ctx, "Sgd::Step");
    for (size_t k = 0; k < slots_.size(); ++k) {
      float* w = slots_[k].value.data<float>();
      const float* g = slots_[k].grad.data<float>();
      float* buf = m != 0.0f ? momentum_[k].data<float>() : nullptr;
      const float wd = slots_[k].weight_decay;
      const int64_t n = slots_[k].value.numel();
      const bool nesterov = options_.nesterov;
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        float d = g[i] + wd * w[i];
        if (buf != nullptr) {
          const float b = first ? d : m * buf[i] + d;
          buf[i] = b;
          d = nesterov ? d + m * b : b;
        }
        w[i] -= lr * d;
      }
    }
    ++steps_;
    return Status::Ok();
  }

  int64_t state_bytes() const override { return StateBytes(momentum_); }
  std::vector<Tensor> state() const override { return momentum_; }
  std::vector<std::string> state_names() const override {
    return momentum_.empty() ? std::vector<std::string>{} : std::vector<std::string>{"momentum_buffer"};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  std::vector<OptimizerSlot> slots_;
  SgdOptions options_;
  std::vector<Tensor> momentum_;
  DeviceChunks chunks_;
  int64_t steps_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<OptimizerSlot> slots, const AdamWOptions& options) : slots_(std::move(slots)), options_(options) {
    CheckSlots(slots_);
    exp_avg_ = ZeroStateFor(slots_);
    exp_avg_sq_ = ZeroStateFor(slots_);
  }

  Status Step(ExecutionContext& ctx, float lr) override {
    ++steps_;
    const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
    const double bias1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(steps_));
    const double bias2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(steps_));
    const float step_size = static_cast<float>(lr / bias1);
    const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
    if (ctx.device().is_cuda()) {
      chunks_.Build(slots_, &exp_avg_, &exp_avg_sq_);
      DDP_ON_CUDA("AdamW::Step", cuda::AdamWStep(ctx, chunks_.data(), chunks_.size(), lr, b1, b2, eps, step_size,
                                                 inv_sqrt_bias2));
      return Status::Ok();
    }
    CheckOnCpu(ctx, "AdamW::Step");
    for (size_t k = 0; k < slots_.size(); ++k) {
      float* w = slots_[k].value.data<float>();
      const float* g = slots_[k].grad.data<float>();
      float* m = exp_avg_[k].data<float>();
      float* v = exp_avg_sq_[k].data<float>();
      const float decay = 1.0f - lr * slots_[k].weight_decay;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        w[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bias2 + eps);
      }
    }
    return Status::Ok();
  }

  int64_t state_bytes() const override { return StateBytes(exp_avg_) + StateBytes(exp_avg_sq_); }
  std::vector<Tensor> state() const override { return Concat(exp_avg_, exp_avg_sq_); }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  std::vector<OptimizerSlot> slots_;
  AdamWOptions options_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  DeviceChunks chunks_;
  int64_t steps_ = 0;
};

class Lamb final : public Optimizer {
 public:
  Lamb(std::vector<OptimizerSlot> slots, const LambOptions& options, int num_params, AllReduceSum all_reduce)
      : slots_(std::move(slots)), options_(options), all_reduce_(std::move(all_reduce)), groups_(num_params) {
    CheckSlots(slots_);
    for (const OptimizerSlot& s : slots_) {
      CHECK(s.param_index >= 0 && s.param_index < groups_)
          << "LAMB slot " << s.name << " has parameter index " << s.param_index << " of " << groups_;
    }
    exp_avg_ = ZeroStateFor(slots_);
    exp_avg_sq_ = ZeroStateFor(slots_);
  }

  Status Step(ExecutionContext& ctx, float lr) override {
    ++steps_;
    const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
    const float inv_bias1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b1), steps_)));
    const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), steps_)));
    if (ctx.device().is_cuda()) return StepOnCuda(ctx, lr, b1, b2, eps, inv_bias1, inv_sqrt_bias2);
    CheckOnCpu(ctx, "Lamb::Step");
    // Pass 1: moments, and per parameter the squared norms of w and of the
    // update direction u ([2 * p] and [2 * p + 1]).
    Tensor norms = Tensor::Zeros({2 * static_cast<int64_t>(groups_)}, DType::kF64);
    double* sums = norms.data<double>();
    for (size_t k = 0; k < slots_.size(); ++k) {
      const float* w = slots_[k].value.data<float>();
      const float* g = slots_[k].grad.data<float>();
      float* m = exp_avg_[k].data<float>();
      float* v = exp_avg_sq_[k].data<float>();
      const float wd = slots_[k].weight_decay;
      double ww = 0.0, uu = 0.0;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for reduction(+ : ww, uu) schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        const float u = m[i] * inv_bias1 / (std::sqrt(v[i]) * inv_sqrt_bias2 + eps) + wd * w[i];
        ww += static_cast<double>(w[i]) * w[i];
        uu += static_cast<double>(u) * u;
      }
      sums[2 * slots_[k].param_index] += ww;
      sums[2 * slots_[k].param_index + 1] += uu;
    }
    if (all_reduce_) RETURN_IF_ERROR(all_reduce_(norms));
    // Pass 2: the update, scaled by each parameter's trust ratio.
    for (size_t k = 0; k < slots_.size(); ++k) {
      const double w_norm = std::sqrt(sums[2 * slots_[k].param_index]);
      const double u_norm = std::sqrt(sums[2 * slots_[k].param_index + 1]);
      const float ratio = w_norm > 0.0 && u_norm > 0.0 ? static_cast<float>(w_norm / u_norm) : 1.0f;
      float* w = slots_[k].value.data<float>();
      const float* m = exp_avg_[k].data<float>();
      const float* v = exp_avg_sq_[k].data<float>();
      const float wd = slots_[k].weight_decay;
      const float scale = lr * ratio;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        const float u = m[i] * inv_bias1 / (std::sqrt(v[i]) * inv_sqrt_bias2 + eps) + wd * w[i];
        w[i] -= scale * u;
      }
    }
    return Status::Ok();
  }

  int64_t state_bytes() const override { return StateBytes(exp_avg_) + StateBytes(exp_avg_sq_); }
  std::vector<Tensor> state() const override { return Concat(exp_avg_, exp_avg_sq_); }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  // The same two passes as fused kernels; the norms stay on the device (and
  // are all-reduced there when sharded).
  Status StepOnCuda(ExecutionContext& ctx, float lr, float b1, float b2, float eps, float inv_bias1,
                    float inv_sqrt_bias2) {
    chunks_.Build(slots_, &exp_avg_, &exp_avg_sq_);
    const Device device = ctx.device();
    if (!norms_.defined()) {
      norms_ = Tensor::Empty({2 * static_cast<int64_t>(groups_)}, DType::kF64, device);
      chunk_norms_ = Tensor::Empty({2 * std::max<int64_t>(1, chunks_.size())}, DType::kF64, device);
    }
    DDP_ON_CUDA("Lamb::Step", cuda::LambMoments(ctx, chunks_.data(), chunks_.size(), b1, b2, eps, inv_bias1,
                                                inv_sqrt_bias2, chunk_norms_.data<double>(), groups_,
                                                norms_.data<double>()));
    if (all_reduce_) RETURN_IF_ERROR(all_reduce_(norms_));
    DDP_ON_CUDA("Lamb::Step", cuda::LambUpdate(ctx, chunks_.data(), chunks_.size(), lr, eps, inv_bias1,
                                               inv_sqrt_bias2, norms_.data<double>()));
    return Status::Ok();
  }

  std::vector<OptimizerSlot> slots_;
  DeviceChunks chunks_;
  Tensor norms_, chunk_norms_;
  LambOptions options_;
  AllReduceSum all_reduce_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  int groups_;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> MakeLamb(std::vector<OptimizerSlot> slots, const LambOptions& options, int num_params,
                                    AllReduceSum all_reduce) {
  return std::make_unique<Lamb>(std::move(slots), options, num_params, std::move(all_reduce));
}

std::unique_ptr<Optimizer> MakeSgd(std::vector<OptimizerSlot> slots, const SgdOptions& options) {
  return std::make_unique<Sgd>(std::move(slots), options);
}

std::unique_ptr<Optimizer> MakeAdamW(std::vector<OptimizerSlot> slots, const AdamWOptions& options) {
  return std::make_unique<AdamW>(std::move(slots), options);
}

double GradientSquaredNorm(ExecutionContext& ctx, const std::vector<Tensor>& grads) {
  double sum = 0.0;
  for (const Tensor& g : grads) sum += SumOfSquares(ctx, g);
  return sum;
}

float ClipGradientsToNorm(ExecutionContext& ctx, const std::vector<Tensor>& grads, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return 1.0f;
  for (const Tensor& g : grads) {
    Tensor t = g;
    Scale(ctx, static_cast<float>(coef), t);
  }
  return static_cast<float>(coef);
}

}  // namespace ddp
