// Independent float64 references of the ops' forward passes: plain loops
// written from the PyTorch definitions, sharing no code with the shipped ops.
// Tensors are flat row-major vectors with their shapes alongside.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace ddp::testing {

using Vec = std::vector<double>;

struct RefConv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
};

// x [N, C, H, W], w [O, C / groups, KH, KW], bias [O] or empty.
Vec RefConv2d(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws, const Vec& bias, const RefConv2dParams& p,
              Shape* out_shape);

// Training-mode batch norm of x ([N, C] or [N, C, H, W]) with batch
// statistics. `batch_mean` and `batch_var` (biased), if not null, receive them.
Vec RefBatchNormTraining(const Vec& x, const Shape& xs, const Vec& gamma, const Vec& beta, double eps,
                         Vec* batch_mean = nullptr, Vec* batch_var = nullptr);
Vec RefBatchNormInference(const Vec& x, const Shape& xs, const Vec& gamma, const Vec& beta, const Vec& mean,
                          const Vec& var, double eps);

Vec RefRelu(const Vec& x);
Vec RefAdd(const Vec& a, const Vec& b);

struct RefPoolParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
};
Vec RefMaxPool2d(const Vec& x, const Shape& xs, const RefPoolParams& p, Shape* out_shape);
Vec RefAvgPool2d(const Vec& x, const Shape& xs, const RefPoolParams& p, Shape* out_shape);
Vec RefGlobalAvgPool(const Vec& x, const Shape& xs);

// x [N, in], w [out, in], bias [out] or empty.
Vec RefLinear(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws, const Vec& bias);

// Mean softmax cross-entropy of logits [N, C]: a one-element vector.
Vec RefCrossEntropy(const Vec& logits, int64_t n, int64_t c, const std::vector<int64_t>& labels,
                    double label_smoothing, int64_t ignore_index);

}  // namespace ddp::testing
