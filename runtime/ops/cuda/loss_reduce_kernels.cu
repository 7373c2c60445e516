#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/ops/cuda/kernel_util.cuh"
#include "runtime/ops/cuda/loss_reduce_cuda.h"

namespace ddp::cuda {
namespace {

constexpr int kReduceBlocks = 1024;

// One block per row: probabilities, and the row's loss (weighted as the CPU
// op weights it) or nothing for an ignored label. row_loss[i] is NaN-free
// for ignored rows (0), and bad_label records the first row whose label is
// out of range.
__global__ void CrossEntropyForwardKernel(const float* logits, const int64_t* labels, int64_t classes,
                                          double smoothing, int64_t ignore_index, float* probs, double* row_loss,
                                          int64_t* bad_label) {
  __shared__ float shared_f[kThreads];
  __shared__ double shared_d[kThreads];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float local_max = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const float v = x[j];
    if (v > local_max || v != v) local_max = v;
  }
  const double max = BlockMax(local_max, shared_f);
  double sum_exp = 0.0, sum_logits = 0.0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    sum_exp += exp(static_cast<double>(x[j]) - max);
    sum_logits += x[j];
  }
  sum_exp = BlockSum(sum_exp, shared_d);
  sum_logits = BlockSum(sum_logits, shared_d);
  const double log_sum_exp = max + log(sum_exp);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    probs[row * classes + j] = static_cast<float>(exp(x[j] - log_sum_exp));
  }
  if (threadIdx.x != 0) return;
  const int64_t y = labels[row];
  if (y == ignore_index) {
    row_loss[row] = 0.0;
    return;
  }
  if (y < 0 || y >= classes) {
    atomicCAS(reinterpret_cast<unsigned long long*>(bad_label), static_cast<unsigned long long>(-1),
              static_cast<unsigned long long>(row));
    row_loss[row] = 0.0;
    return;
  }
  const double nll = log_sum_exp - x[y];
  const double uniform = log_sum_exp - sum_logits / static_cast<double>(classes);
  row_loss[row] = (1.0 - smoothing) * nll + smoothing * uniform;
}

// One block: result[0] = sum of row losses, result[1] = counted rows, in a
// fixed order.
__global__ void CrossEntropyTotalKernel(const double* row_loss, const int64_t* labels, int64_t rows,
                                        int64_t ignore_index, double* result) {
  __shared__ double shared[kThreads];
  double total = 0.0, counted = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    total += row_loss[i];
    counted += labels[i] != ignore_index ? 1.0 : 0.0;
  }
  total = BlockSum(total, shared);
  counted = BlockSum(counted, shared);
  if (threadIdx.x == 0) {
    result[0] = total;
    result[1] = counted;
  }
}

__global__ void CountLabelsKernel(const int64_t* labels, int64_t rows, int64_t ignore_index, int64_t* counted) {
  __shared__ double shared[kThreads];
  double c = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) c += labels[i] != ignore_index ? 1.0 : 0.0;
  c = BlockSum(c, shared);
  if (threadIdx.x == 0) *counted = static_cast<int64_t>(c);
}

__global__ void CrossEntropyBackwardKernel(const float* probs, const int64_t* labels, int64_t rows, int64_t classes,
                                           double smoothing, int64_t ignore_index, double loss_grad,
                                           const int64_t* counted, float* dlogits) {
  const double scale = *counted > 0 ? loss_grad / static_cast<double>(*counted) : 0.0;
  const double uniform = smoothing / static_cast<double>(classes);
  DDP_GRID_STRIDE(i, rows * classes) {
    const int64_t row = i / classes, j = i % classes;
    const int64_t y = labels[row];
    if (y == ignore_index) {
      dlogits[i] = 0.0f;
      continue;
    }
    const double target = uniform + (j == y ? 1.0 - smoothing : 0.0);
    dlogits[i] = static_cast<float>(scale * (probs[i] - target));
  }
}

enum class ReduceKind { kSum, kSumOfSquares, kNonFinite };

// Per-block partial sums in double, then one block adds them in order.
__global__ void ReducePartialKernel(const float* x, int64_t n, ReduceKind kind, double* partial) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  DDP_GRID_STRIDE(i, n) {
    const double v = x[i];
    switch (kind) {
      case ReduceKind::kSum: sum += v; break;
      case ReduceKind::kSumOfSquares: sum += v * v; break;
      case ReduceKind::kNonFinite: sum += isfinite(x[i]) ? 0.0 : 1.0; break;
    }
  }
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void ReduceFinalKernel(const double* partial, int blocks, double* result) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) sum += partial[i];
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) *result = sum;
}

// Scratch slots for these ops (below ExecutionContext::kFirstLayerScratchSlot).
constexpr int kPartialSlot = 5, kResultSlot = 6;

double Reduce(ExecutionContext& ctx, const Tensor& x, ReduceKind kind) {
  const int64_t n = x.numel();
  const int blocks = static_cast<int>(BlocksFor(n, kReduceBlocks));
  Tensor partial = ctx.ScratchTensor(kPartialSlot, {blocks}, DType::kF64);
  Tensor result = ctx.ScratchTensor(kResultSlot, {1}, DType::kF64);
  ReducePartialKernel<<<blocks, kThreads, 0, StreamOf(ctx)>>>(x.data<float>(), n, kind, partial.data<double>());
  DDP_CHECK_LAUNCH("ReducePartialKernel");
  ReduceFinalKernel<<<1, kThreads, 0, StreamOf(ctx)>>>(partial.data<double>(), blocks, result.data<double>());
  DDP_CHECK_LAUNCH("ReduceFinalKernel");
  double host = 0.0;
  CHECK(!IsCapturing(ctx.cuda_stream())) << "a reduction read on the host while capturing a CUDA graph";
  Synchronize(ctx.cuda_stream());  // polled: a copy to pageable memory would block unwatched
  DDP_CUDA_CHECK(cudaMemcpyAsync(&host, result.raw_data(), sizeof(double), cudaMemcpyDeviceToHost, StreamOf(ctx)));
  Synchronize(ctx.cuda_stream());  // polled, through the wait watchdog
  return host;
}

}  // namespace

void SoftmaxCrossEntropyForwardToDevice(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                        const Tensor& labels, Tensor& probs, Tensor& result) {
  const int64_t n = logits.dim(0), c = logits.dim(1);
  Tensor row_loss = ctx.ScratchTensor(kPartialSlot, {n > 0 ? n : 1}, DType::kF64);
  // [total, counted, bad label row (as i64 bits)]
  int64_t* bad_label = reinterpret_cast<int64_t*>(result.data<double>() + 2);
  DDP_CUDA_CHECK(cudaMemsetAsync(bad_label, 0xff, sizeof(int64_t), StreamOf(ctx)));
  if (n > 0) {
    CrossEntropyForwardKernel<<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
        logits.data<float>(), labels.data<int64_t>(), c, p.label_smoothing, p.ignore_index, probs.data<float>(),
        row_loss.data<double>(), bad_label);
    DDP_CHECK_LAUNCH("CrossEntropyForwardKernel");
  }
  CrossEntropyTotalKernel<<<1, kThreads, 0, StreamOf(ctx)>>>(row_loss.data<double>(), labels.data<int64_t>(), n,
                                                            p.ignore_index, result.data<double>());
  DDP_CHECK_LAUNCH("CrossEntropyTotalKernel");
}

CrossEntropyResult CrossEntropyResultOf(ExecutionContext& ctx, const Tensor& result, const Tensor& labels,
                                        int64_t classes) {
  double host[3];
  CHECK(!IsCapturing(ctx.cuda_stream())) << "the loss read on the host while capturing a CUDA graph";
  Synchronize(ctx.cuda_stream());  // polled: a copy to pageable memory would block unwatched
  DDP_CUDA_CHECK(cudaMemcpyAsync(host, result.raw_data(), sizeof(host), cudaMemcpyDeviceToHost, StreamOf(ctx)));
  Synchronize(ctx.cuda_stream());  // polled, through the wait watchdog
  int64_t bad_row = 0;
  std::memcpy(&bad_row, &host[2], sizeof(bad_row));
  if (bad_row >= 0) {
    int64_t label = 0;
    DDP_CUDA_CHECK(cudaMemcpy(&label, labels.data<int64_t>() + bad_row, sizeof(label), cudaMemcpyDeviceToHost));
    std::fprintf(stderr, "cross-entropy label %lld of sample %lld is outside [0, %lld)\n",
                 static_cast<long long>(label), static_cast<long long>(bad_row), static_cast<long long>(classes));
    std::abort();
  }
  CrossEntropyResult r;
  r.counted = static_cast<int64_t>(host[1]);
  r.loss = r.counted > 0 ? host[0] / host[1] : std::numeric_limits<double>::quiet_NaN();
  return r;
}

CrossEntropyResult SoftmaxCrossEntropyForward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& logits,
                                              const Tensor& labels, Tensor& probs) {
  Tensor result = ctx.ScratchTensor(kResultSlot, {3}, DType::kF64);
  cuda::SoftmaxCrossEntropyForwardToDevice(ctx, p, logits, labels, probs, result);
  return cuda::CrossEntropyResultOf(ctx, result, labels, logits.dim(1));
}

void SoftmaxCrossEntropyBackward(ExecutionContext& ctx, const CrossEntropyParams& p, const Tensor& probs,
                                 const Tensor& labels, double loss_grad, Tensor& dlogits) {
  const int64_t n = probs.dim(0), c = probs.dim(1);
  Tensor counted = ctx.ScratchTensor(kResultSlot, {1}, DType::kI64);
  CountLabelsKernel<<<1, kThreads, 0, StreamOf(ctx)>>>(labels.data<int64_t>(), n, p.ignore_index,
                                                      counted.data<int64_t>());
  DDP_CHECK_LAUNCH("CountLabelsKernel");
  if (n * c == 0) return;
  CrossEntropyBackwardKernel<<<BlocksFor(n * c), kThreads, 0, StreamOf(ctx)>>>(
      probs.data<float>(), labels.data<int64_t>(), n, c, p.label_smoothing, p.ignore_index, loss_grad,
      counted.data<int64_t>(), dlogits.data<float>());
  DDP_CHECK_LAUNCH("CrossEntropyBackwardKernel");
}

double Sum(ExecutionContext& ctx, const Tensor& x) { return Reduce(ctx, x, ReduceKind::kSum); }
double SumOfSquares(ExecutionContext& ctx, const Tensor& x) { return Reduce(ctx, x, ReduceKind::kSumOfSquares); }
bool AllFinite(ExecutionContext& ctx, const Tensor& x) { return Reduce(ctx, x, ReduceKind::kNonFinite) == 0.0; }

}  // namespace ddp::cuda
