#include "runtime/ops/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/ops/cuda/loss_reduce_cuda.h"
#include "runtime/ops/op_checks.h"

namespace ddp {
namespace {

void CheckArguments(const CrossEntropyParams& p, const Tensor& logits_like, const Tensor& labels) {
  CheckF32(logits_like, "cross-entropy logits");
  CHECK_EQ(logits_like.ndim(), 2) << "cross-entropy logits must be [N, C], got " << logits_like.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.shape() == Shape{logits_like.dim(0)})
      << "cross-entropy labels must be i64 [" << logits_like.dim(0) << "], got " << labels.DebugString();
  CHECK(p.label_smoothing >= 0.0 && p.label_smoothing <= 1.0) << "label smoothing " << p.label_smoothing;
}

// The meta device computes no loss: a finite stand-in, so a planning step
// runs as a real one would.
CrossEntropyResult MetaResult() {
  CrossEntropyResult r;
  r.loss = 0.0;
  r.counted = 1;
  return r;
}

}  // namespace

CrossEntropyResult SoftmaxCrossEntropyForward(ExecutionContext& ctx, const CrossEntropyParams& p,
                                              const Tensor& logits, const Tensor& labels, Tensor& probs) {
  CheckArguments(p, logits, labels);
  CheckSameShape(logits, probs, "cross-entropy probabilities");
  CheckOnDevice(ctx, "SoftmaxCrossEntropyForward", {&logits, &labels, &probs});
  if (OnMeta(ctx)) return MetaResult();
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("SoftmaxCrossEntropyForward", cuda::SoftmaxCrossEntropyForward(ctx, p, logits, labels, probs));
  }
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const float* x = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();
  float* pr = probs.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    CHECK(y[i] == p.ignore_index || (y[i] >= 0 && y[i] < c))
        << "cross-entropy label " << y[i] << " of sample " << i << " is outside [0, " << c << ")";
  }
  // Rows in parallel (a vocabulary-wide softmax is the MLM head's cost);
  // each row's loss alone, summed in row order after: the same total for
  // any thread count.
  std::vector<double> row_loss(n, 0.0);
#pragma omp parallel for schedule(static) if (n * c > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * c;
    float* prow = pr + i * c;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j) max = std::max<double>(max, row[j]);
    double sum_exp = 0.0, sum_logits = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      sum_exp += std::exp(static_cast<double>(row[j]) - max);
      sum_logits += row[j];
    }
    const double log_sum_exp = max + std::log(sum_exp);
    for (int64_t j = 0; j < c; ++j) prow[j] = static_cast<float>(std::exp(row[j] - log_sum_exp));
    if (y[i] == p.ignore_index) continue;
    // -log p_y weighted (1 - s), plus the uniform part: s/C * sum_j -log p_j.
    const double nll = log_sum_exp - row[y[i]];
    const double uniform = log_sum_exp - sum_logits / static_cast<double>(c);
    row_loss[i] = (1.0 - p.label_smoothing) * nll + p.label_smoothing * uniform;
  }
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == p.ignore_index) continue;
    total += row_loss[i];
    ++counted;
  }
  CrossEntropyResult result;
  result.counted = counted;
  result.loss = counted > 0 ? total / static_cast<double>(counted) : std::numeric_limits<double>::quiet_NaN();
  return result;
}

void SoftmaxCrossEntropyForwardToDevice(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                        const Tensor& labels, Tensor& probs, Tensor& result) {
  CHECK(result.dtype() == DType::kF64 && result.numel() == 3) << "cross-entropy result " << result.DebugString();
  CheckOnDevice(ctx, "SoftmaxCrossEntropyForwardToDevice", {&result, &logits, &labels, &probs});
  CheckArguments(p, logits, labels);
  CheckSameShape(logits, probs, "cross-entropy probabilities");
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("SoftmaxCrossEntropyForwardToDevice",
                       cuda::SoftmaxCrossEntropyForwardToDevice(ctx, p, logits, labels, probs, result));
  }
  // The CPU checks labels as it goes; the marker says "none bad".
  const CrossEntropyResult r = SoftmaxCrossEntropyForward(ctx, p, logits, labels, probs);
  double* out = result.data<double>();
  out[0] = r.counted > 0 ? r.loss * static_cast<double>(r.counted) : 0.0;
  out[1] = static_cast<double>(r.counted);
  out[2] = -1.0;
}

CrossEntropyResult CrossEntropyResultOf(ExecutionContext& ctx, const Tensor& result, const Tensor& labels,
                                        int64_t classes) {
  if (OnMeta(ctx)) return MetaResult();
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("CrossEntropyResultOf", cuda::CrossEntropyResultOf(ctx, result, labels, classes));
  }
  const double* in = result.data<double>();
  CrossEntropyResult r;
  r.counted = static_cast<int64_t>(in[1]);
  r.loss = r.counted > 0 ? in[0] / in[1] : std::numeric_limits<double>::quiet_NaN();
  return r;
}

void SoftmaxCrossEntropyBackward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& probs,
                                 const Tensor& labels, double loss_grad, Tensor& dlogits) {
  CheckArguments(p, probs, labels);
  CheckSameShape(probs, dlogits, "cross-entropy logits gradient");
  CheckOnDevice(ctx, "SoftmaxCrossEntropyBackward", {&probs, &labels, &dlogits});
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("SoftmaxCrossEntropyBackward",
                       cuda::SoftmaxCrossEntropyBackward(ctx, p, probs, labels, loss_grad, dlogits));
  }
  const int64_t n = probs.dim(0), c = probs.dim(1);
  const int64_t* y = labels.data<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) counted += y[i] != p.ignore_index;
  const float* pr = probs.data<float>();
  float* dx = dlogits.data<float>();
  // d/dlogit_j of the per-sample loss is p_j - q_j with target
  // q = (1 - s) onehot(y) + s / C.
  const double scale = counted > 0 ? loss_grad / static_cast<double>(counted) : 0.0;
  const double uniform = p.label_smoothing / static_cast<double>(c);
  for (int64_t i = 0; i < n; ++i) {
    float* drow = dx + i * c;
    if (y[i] == p.ignore_index) {
      std::fill(drow, drow + c, 0.0f);
      continue;
    }
    const float* prow = pr + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const double target = uniform + (j == y[i] ? 1.0 - p.label_smoothing : 0.0);
      drow[j] = static_cast<float>(scale * (prow[j] - target));
    }
  }
}

CorrectCount CountCorrect(const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  CrossEntropyParams p;
  CheckArguments(p, logits, labels);
  const Tensor host_logits = logits.To(Device::Cpu()), host_labels = labels.To(Device::Cpu());
  const int64_t rows = host_logits.dim(0), classes = host_logits.dim(1);
  CorrectCount count;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = host_labels.data<int64_t>()[r];
    if (label == ignore_index) continue;
    const float* row = host_logits.data<float>() + r * classes;
    count.correct += std::max_element(row, row + classes) - row == label;
    ++count.counted;
  }
  return count;
}

}  // namespace ddp
