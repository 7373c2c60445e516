// Dropout as DESIGN.md's contract has it: masks from a counter-based
// generator keyed by the seed, the step, the site and each element's
// global sample index (runtime/ops/transformer.h's DropoutForward), never
// the rank, so N ranks draw what one rank with N accumulated micro-batches
// draws, and a checkpointed layer recomputes the same mask in backward.
#pragma once

#include <cstdint>

#include "runtime/execution_context.h"
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

// One dropout site: a mask drawn from the step state (never a parameter).
class DropoutSite {
 public:
  DropoutSite(const StepState* state, int64_t site) : state_(state), site_(site) {}
  // x's leading dimension, or its rows' sample-major order, gives each
  // element's sample: x holds state->batch samples. Without `keep_mask` (a
  // forward whose backward recomputes), nothing is kept.
  Tensor Forward(ExecutionContext& ctx, const Tensor& x, bool keep_mask = true);
  Tensor Backward(ExecutionContext& ctx, const Tensor& dy);

 private:
  const StepState* state_;
  int64_t site_;
  float p_ = 0.0f;
  Tensor keep_;
};

}  // namespace ddp
