// Softmax cross-entropy and whole-tensor reductions on CUDA: own kernels
// with the CPU ops' semantics (runtime/ops/loss.h, runtime/ops/reduce.h),
// accumulating in double in a fixed order, so results repeat run to run.
// The scalar results travel to the host, which waits for them.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/ops/loss.h"
#include "runtime/tensor.h"

namespace ddp::cuda {

CrossEntropyResult SoftmaxCrossEntropyForward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                              const Tensor& labels, Tensor& probs);
void SoftmaxCrossEntropyForwardToDevice(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                        const Tensor& labels, Tensor& probs, Tensor& result);
CrossEntropyResult CrossEntropyResultOf(ExecutionContext& ctx, const Tensor& result, const Tensor& labels,
                                        int64_t classes);
void SoftmaxCrossEntropyBackward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& probs,
                                 const Tensor& labels, double loss_grad, Tensor& dlogits);

double Sum(ExecutionContext& ctx, const Tensor& x);
double SumOfSquares(ExecutionContext& ctx, const Tensor& x);
bool AllFinite(ExecutionContext& ctx, const Tensor& x);

}  // namespace ddp::cuda
