#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/ops/elementwise.h"
#include "runtime/ops/op_checks.h"
#include "runtime/ops/reduce.h"
#include "runtime/optim/adam_moments.h"
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
    if (ctx.device().is_meta()) {  // nothing to update: the state exists, which is what a plan counts
      ++steps_;
      return Status::Ok();
    }
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

// What AdamW and LAMB share: their slots, the moments (AdamMoments) with
// the step count, which are their state, and the chunk table of both.
class AdamFamily : public Optimizer {
 public:
  int64_t state_bytes() const override { return moments_.state_bytes(); }
  std::vector<Tensor> state() const override { return moments_.state(); }
  std::vector<std::string> state_names() const override { return AdamMoments::state_names(); }
  int64_t steps() const override { return moments_.steps(); }
  void set_steps(int64_t steps) override { moments_.set_steps(steps); }

 protected:
  AdamFamily(std::vector<OptimizerSlot> slots, float beta1, float beta2, float eps)
      : slots_(std::move(slots)), moments_(ZeroStateFor(slots_), ZeroStateFor(slots_), beta1, beta2, eps) {
    CheckSlots(slots_);
  }

  // The CUDA kernels' chunk table over the slots and both moments.
  void BuildChunks() { chunks_.Build(slots_, &moments_.first(), &moments_.second()); }

  std::vector<OptimizerSlot> slots_;
  AdamMoments moments_;
  DeviceChunks chunks_;
};

class AdamW final : public AdamFamily {
 public:
  AdamW(std::vector<OptimizerSlot> slots, const AdamWOptions& options)
      : AdamFamily(std::move(slots), options.beta1, options.beta2, options.eps) {}

  Status Step(ExecutionContext& ctx, float lr) override {
    const AdamBiasCorrections bias = moments_.NextStep();
    const float b1 = moments_.beta1(), b2 = moments_.beta2(), eps = moments_.eps();
    const float step_size = static_cast<float>(lr / bias.bias1);
    const float inv_sqrt_bias2 = bias.inv_sqrt_bias2;
    if (ctx.device().is_meta()) return Status::Ok();
    if (ctx.device().is_cuda()) {
      BuildChunks();
      DDP_ON_CUDA("AdamW::Step", cuda::AdamWStep(ctx, chunks_.data(), chunks_.size(), lr, b1, b2, eps, step_size,
                                                 inv_sqrt_bias2));
      return Status::Ok();
    }
    CheckOnCpu(ctx, "AdamW::Step");
    for (size_t k = 0; k < slots_.size(); ++k) {
      float* w = slots_[k].value.data<float>();
      const float* g = slots_[k].grad.data<float>();
      float* m = moments_.first()[k].data<float>();
      float* v = moments_.second()[k].data<float>();
      const float decay = 1.0f - lr * slots_[k].weight_decay;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        w[i] *= decay;
        UpdateAdamMoments(g[i], b1, b2, m[i], v[i]);
        w[i] -= step_size * m[i] / AdamDenominator(v[i], inv_sqrt_bias2, eps);
      }
    }
    return Status::Ok();
  }
};

class Lamb final : public AdamFamily {
 public:
  Lamb(std::vector<OptimizerSlot> slots, const LambOptions& options, int num_params, AllReduceSum all_reduce)
      : AdamFamily(std::move(slots), options.beta1, options.beta2, options.eps),
        all_reduce_(std::move(all_reduce)),
        groups_(num_params) {
    for (const OptimizerSlot& s : slots_) {
      CHECK(s.param_index >= 0 && s.param_index < groups_)
          << "LAMB slot " << s.name << " has parameter index " << s.param_index << " of " << groups_;
    }
  }

  Status Step(ExecutionContext& ctx, float lr) override {
    const AdamBiasCorrections bias = moments_.NextStep();
    const float b1 = moments_.beta1(), b2 = moments_.beta2(), eps = moments_.eps();
    const float inv_bias1 = static_cast<float>(1.0 / bias.bias1);
    const float inv_sqrt_bias2 = bias.inv_sqrt_bias2;
    if (ctx.device().is_meta()) return Status::Ok();
    if (ctx.device().is_cuda()) return StepOnCuda(ctx, lr, b1, b2, eps, inv_bias1, inv_sqrt_bias2);
    CheckOnCpu(ctx, "Lamb::Step");
    // Pass 1: moments, and per parameter the squared norms of w and of the
    // update direction u ([2 * p] and [2 * p + 1]).
    Tensor norms = Tensor::Zeros({2 * static_cast<int64_t>(groups_)}, DType::kF64);
    double* sums = norms.data<double>();
    for (size_t k = 0; k < slots_.size(); ++k) {
      const float* w = slots_[k].value.data<float>();
      const float* g = slots_[k].grad.data<float>();
      float* m = moments_.first()[k].data<float>();
      float* v = moments_.second()[k].data<float>();
      const float wd = slots_[k].weight_decay;
      double ww = 0.0, uu = 0.0;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for reduction(+ : ww, uu) schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        UpdateAdamMoments(g[i], b1, b2, m[i], v[i]);
        const float u = LambDirection(m[i], v[i], w[i], wd, eps, inv_bias1, inv_sqrt_bias2);
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
      const float* m = moments_.first()[k].data<float>();
      const float* v = moments_.second()[k].data<float>();
      const float wd = slots_[k].weight_decay;
      const float scale = lr * ratio;
      const int64_t n = slots_[k].value.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
      for (int64_t i = 0; i < n; ++i) {
        w[i] -= scale * LambDirection(m[i], v[i], w[i], wd, eps, inv_bias1, inv_sqrt_bias2);
      }
    }
    return Status::Ok();
  }

 private:
  // The same two passes as fused kernels; the norms stay on the device (and
  // are all-reduced there when sharded).
  Status StepOnCuda(ExecutionContext& ctx, float lr, float b1, float b2, float eps, float inv_bias1,
                    float inv_sqrt_bias2) {
    BuildChunks();
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

  Tensor norms_, chunk_norms_;
  AllReduceSum all_reduce_;
  int groups_;
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
