// Optimizers update parameters from gradients, matching torch.optim. They
// work on slots (a parameter, or under ZeRO a rank's shard of one) so the
// same code updates whole parameters or shards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/execution_context.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

struct OptimizerSlot {
  std::string name;  // the parameter's name, for messages and checkpoints
  Tensor value;      // f32 master weights
  Tensor grad;
  float weight_decay = 0.0f;
  // Which parameter this slot is (a piece of): slots of one parameter share
  // it. LAMB's per-parameter norms sum over them.
  int param_index = -1;
  // Where the piece starts within the parameter (elements; 0 for a whole
  // parameter): checkpoints store state in parameter coordinates.
  int64_t offset = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every slot with learning rate `lr`. Fails only if a
  // collective it needs (sharded LAMB's norms) fails.
  virtual Status Step(ExecutionContext& ctx, float lr) = 0;
  // Bytes of optimizer state (momentum, moments) this rank holds.
  virtual int64_t state_bytes() const = 0;
  // That state's tensors, slot by slot (SGD: momentum; AdamW and LAMB: the
  // first moments, then the second), and the count of steps taken, which
  // bias corrections and SGD's first step read: what a step changes besides
  // the weights.
  virtual std::vector<Tensor> state() const = 0;
  // The kinds of state, in state()'s order, each holding one tensor per
  // slot: PyTorch's names ("momentum_buffer"; "exp_avg", "exp_avg_sq").
  virtual std::vector<std::string> state_names() const = 0;
  virtual int64_t steps() const = 0;
  // Restoring a checkpoint: the step count (the state's values are written
  // into state()'s tensors).
  virtual void set_steps(int64_t steps) = 0;
};

struct SgdOptions {
  float momentum = 0.9f;
  bool nesterov = false;
};

struct AdamWOptions {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

struct LambOptions {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f;
};

// Sums a f64 tensor across ranks in place (sharded optimizers), or null when
// every slot holds a whole parameter.
using AllReduceSum = std::function<Status(Tensor&)>;

// torch.optim.SGD(momentum, nesterov, weight_decay), dampening 0:
//   g = grad + wd * w;  buf = g (first step) or momentum * buf + g;
//   w -= lr * (nesterov ? g + momentum * buf : buf)
std::unique_ptr<Optimizer> MakeSgd(std::vector<OptimizerSlot> slots, const SgdOptions& options);
// torch.optim.AdamW: decoupled weight decay w -= lr * wd * w, then the Adam
// step with bias corrections.
std::unique_ptr<Optimizer> MakeAdamW(std::vector<OptimizerSlot> slots, const AdamWOptions& options);
// LAMB (You et al.): the Adam direction u = m_hat / (sqrt(v_hat) + eps) +
// wd * w, scaled per parameter by the trust ratio ||w|| / ||u|| (1 when
// either is 0): w -= lr * ratio * u. Under ZeRO a parameter can span several
// ranks' pieces: its norms are summed over its slots and, through
// `all_reduce`, over ranks. `num_params` (every rank's alike) sizes that
// all-reduce; slot param_index values lie below it.
std::unique_ptr<Optimizer> MakeLamb(std::vector<OptimizerSlot> slots, const LambOptions& options, int num_params,
                                    AllReduceSum all_reduce = nullptr);

// Sum of squares of every gradient, in double: the square of the global norm
// (under data parallelism, reduce this across ranks before the square root).
double GradientSquaredNorm(ExecutionContext& ctx, const std::vector<Tensor>& grads);
// torch.nn.utils.clip_grad_norm_: scales every gradient by
// max_norm / (norm + 1e-6) when that is below 1. Returns the scale applied.
float ClipGradientsToNorm(ExecutionContext& ctx, const std::vector<Tensor>& grads, double norm, double max_norm);

}  // namespace ddp
