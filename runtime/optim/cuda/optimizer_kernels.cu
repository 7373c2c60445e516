#include "runtime/ops/cuda/kernel_util.cuh"
#include "runtime/optim/adam_moments.h"
#include "runtime/optim/cuda/optimizer_kernels.h"

namespace ddp::cuda {
namespace {

__global__ void SgdKernel(const OptimizerChunk* chunks, float lr, float momentum, bool nesterov, bool first) {
  const OptimizerChunk c = chunks[blockIdx.x];
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    float d = c.g[i] + c.weight_decay * c.w[i];
    if (c.m != nullptr) {
      const float b = first ? d : momentum * c.m[i] + d;
      c.m[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    c.w[i] -= lr * d;
  }
}

__global__ void AdamWKernel(const OptimizerChunk* chunks, float lr, float b1, float b2, float eps, float step_size,
                            float inv_sqrt_bias2) {
  const OptimizerChunk c = chunks[blockIdx.x];
  const float decay = 1.0f - lr * c.weight_decay;
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    float w = c.w[i] * decay;
    float m = c.m[i], v = c.v[i];
    UpdateAdamMoments(c.g[i], b1, b2, m, v);
    c.m[i] = m;
    c.v[i] = v;
    c.w[i] = w - step_size * m / AdamDenominator(v, inv_sqrt_bias2, eps);
  }
}

__global__ void LambMomentsKernel(const OptimizerChunk* chunks, float b1, float b2, float eps, float inv_bias1,
                                  float inv_sqrt_bias2, double* chunk_norms) {
  __shared__ double shared[kThreads];
  const OptimizerChunk c = chunks[blockIdx.x];
  double ww = 0.0, uu = 0.0;
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    float m = c.m[i], v = c.v[i];
    UpdateAdamMoments(c.g[i], b1, b2, m, v);
    c.m[i] = m;
    c.v[i] = v;
    const float u = LambDirection(m, v, c.w[i], c.weight_decay, eps, inv_bias1, inv_sqrt_bias2);
    ww += static_cast<double>(c.w[i]) * c.w[i];
    uu += static_cast<double>(u) * u;
  }
  ww = BlockSum(ww, shared);
  uu = BlockSum(uu, shared);
  if (threadIdx.x == 0) {
    chunk_norms[2 * blockIdx.x] = ww;
    chunk_norms[2 * blockIdx.x + 1] = uu;
  }
}

// One thread per parameter: its chunks' sums, in chunk order.
__global__ void LambSumNormsKernel(const OptimizerChunk* chunks, int64_t num_chunks, const double* chunk_norms,
                                   int num_params, double* norms) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= num_params) return;
  double ww = 0.0, uu = 0.0;
  for (int64_t k = 0; k < num_chunks; ++k) {
    if (chunks[k].param != p) continue;
    ww += chunk_norms[2 * k];
    uu += chunk_norms[2 * k + 1];
  }
  norms[2 * p] = ww;
  norms[2 * p + 1] = uu;
}

__global__ void LambUpdateKernel(const OptimizerChunk* chunks, float lr, float eps, float inv_bias1,
                                 float inv_sqrt_bias2, const double* norms) {
  const OptimizerChunk c = chunks[blockIdx.x];
  const double w_norm = sqrt(norms[2 * c.param]), u_norm = sqrt(norms[2 * c.param + 1]);
  const float ratio = w_norm > 0.0 && u_norm > 0.0 ? static_cast<float>(w_norm / u_norm) : 1.0f;
  const float scale = lr * ratio;
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    c.w[i] -= scale * LambDirection(c.m[i], c.v[i], c.w[i], c.weight_decay, eps, inv_bias1, inv_sqrt_bias2);
  }
}

unsigned Grid(int64_t num_chunks) { return static_cast<unsigned>(num_chunks); }

}  // namespace

void SgdStep(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float momentum,
             bool nesterov, bool first_step) {
  if (num_chunks == 0) return;
  SgdKernel<<<Grid(num_chunks), kThreads, 0, StreamOf(ctx)>>>(chunks, lr, momentum, nesterov, first_step);
  DDP_CHECK_LAUNCH("SgdKernel");
}

void AdamWStep(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float beta1,
               float beta2, float eps, float step_size, float inv_sqrt_bias2) {
  if (num_chunks == 0) return;
  AdamWKernel<<<Grid(num_chunks), kThreads, 0, StreamOf(ctx)>>>(chunks, lr, beta1, beta2, eps, step_size,
                                                              inv_sqrt_bias2);
  DDP_CHECK_LAUNCH("AdamWKernel");
}

void LambMoments(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float beta1, float beta2,
                 float eps, float inv_bias1, float inv_sqrt_bias2, double* chunk_norms, int num_params,
                 double* norms) {
  if (num_chunks > 0) {
    LambMomentsKernel<<<Grid(num_chunks), kThreads, 0, StreamOf(ctx)>>>(chunks, beta1, beta2, eps, inv_bias1,
                                                                      inv_sqrt_bias2, chunk_norms);
    DDP_CHECK_LAUNCH("LambMomentsKernel");
  }
  if (num_params == 0) return;
  LambSumNormsKernel<<<static_cast<unsigned>((num_params + kThreads - 1) / kThreads), kThreads, 0, StreamOf(ctx)>>>(
      chunks, num_chunks, chunk_norms, num_params, norms);
  DDP_CHECK_LAUNCH("LambSumNormsKernel");
}

void LambUpdate(ExecutionContext& ctx, const OptimizerChunk* chunks, int64_t num_chunks, float lr, float eps,
                float inv_bias1, float inv_sqrt_bias2, const double* norms) {
  if (num_chunks == 0) return;
  LambUpdateKernel<<<Grid(num_chunks), kThreads, 0, StreamOf(ctx)>>>(chunks, lr, eps, inv_bias1, inv_sqrt_bias2,
                                                                   norms);
  DDP_CHECK_LAUNCH("LambUpdateKernel");
}

}  // namespace ddp::cuda
