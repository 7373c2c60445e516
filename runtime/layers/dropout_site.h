// Dropout as DESIGN.md's contract has it: masks from a counter-based
// generator keyed by the seed, the step, the site and each element's
// global sample index (runtime/ops/transformer.h's DropoutForward), never
// the rank, so N ranks draw what one rank with N accumulated micro-batches
// draws, and a checkpointed layer recomputes the same mask in backward.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
#include "runtime/ops/transformer.h"
#include "runtime/tensor.h"

namespace ddp {

// What every layer of one forward pass reads besides its input: set by the
// model before the forward, read by each dropout site and attention.
struct StepState {
  // i64 [N, T], 1 attend, 0 padding; undefined: attend everywhere. Held
  // until the next forward (checkpointed layers recompute in backward).
  Tensor attention_mask;
  int64_t batch = 0, seq = 0;
  int64_t step = 0, first_sample = 0;  // the batch's first global sample
  uint64_t seed = 0;
  float dropout = 0.0f;  // the probability, 0 outside training
};

// One dropout site: a mask drawn from the step state (never a parameter),
// and drawn again in backward rather than kept: the site keeps only what
// the draws are keyed by.
class DropoutSite {
 public:
  DropoutSite(const StepState* state, int64_t site) : state_(state), site_(site) {}
  // x's leading dimension, or its rows' sample-major order, gives each
  // element's sample: x holds state->batch samples.
  Tensor Forward(ExecutionContext& ctx, const Tensor& x);
  // The last Forward's mask applied to dy, drawn again.
  Tensor Backward(ExecutionContext& ctx, const Tensor& dy);

 private:
  // x with the last Forward's mask and scale (dy's gradient is the same map).
  Tensor Dropped(ExecutionContext& ctx, const Tensor& x) const;

  const StepState* state_;
  int64_t site_;
  // The last Forward's draws: p (0: none pending), key, samples.
  float p_ = 0.0f;
  DropoutKey key_;
  int64_t samples_ = 0, first_sample_ = 0;
};

}  // namespace ddp
