// Adam's moments, shared by AdamW and LAMB: per element
//   m = b1 * m + (1 - b1) * g,   v = b2 * v + (1 - b2) * g^2,
// and, at step t, the bias corrections 1 - b1^t and 1 - b2^t, which make
// m / (1 - b1^t) and sqrt(v) / sqrt(1 - b2^t) + eps. The element functions
// are compiled by nvcc too: the CUDA kernels (cuda/optimizer_kernels.cu)
// do the CPU optimizers' arithmetic with them.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

#ifdef __CUDACC__
#define DDP_ADAM_INLINE __host__ __device__ __forceinline__
#else
#define DDP_ADAM_INLINE inline
#endif

namespace ddp {

// One element's moments, updated in place from its gradient `g`.
DDP_ADAM_INLINE void UpdateAdamMoments(float g, float b1, float b2, float& m, float& v) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
}

// sqrt(v_hat) + eps, the denominator of the Adam direction, from the second
// moment and 1 / sqrt(1 - b2^t).
DDP_ADAM_INLINE float AdamDenominator(float v, float inv_sqrt_bias2, float eps) {
  return sqrtf(v) * inv_sqrt_bias2 + eps;
}

// LAMB's update direction before its trust ratio: the bias-corrected Adam
// direction m_hat / (sqrt(v_hat) + eps) plus weight decay wd * w.
DDP_ADAM_INLINE float LambDirection(float m, float v, float w, float wd, float eps, float inv_bias1,
                                    float inv_sqrt_bias2) {
  return m * inv_bias1 / AdamDenominator(v, inv_sqrt_bias2, eps) + wd * w;
}

// Step t's bias corrections.
struct AdamBiasCorrections {
  double bias1 = 1.0;           // 1 - b1^t
  float inv_sqrt_bias2 = 1.0f;  // 1 / sqrt(1 - b2^t), rounded to f32
};

// The moments of a list of slots (one f32 tensor each, zero at the start),
// and the count of steps taken.
class AdamMoments {
 public:
  // `first` and `second`: the zero moments, one tensor per slot.
  AdamMoments(std::vector<Tensor> first, std::vector<Tensor> second, float beta1, float beta2, float eps);

  // Counts one more step; its bias corrections.
  AdamBiasCorrections NextStep();

  float beta1() const { return beta1_; }
  float beta2() const { return beta2_; }
  float eps() const { return eps_; }
  std::vector<Tensor>& first() { return first_; }    // exp_avg, per slot
  std::vector<Tensor>& second() { return second_; }  // exp_avg_sq, per slot

  // Optimizer's state interface: the first moments, then the second.
  std::vector<Tensor> state() const;
  static std::vector<std::string> state_names() { return {"exp_avg", "exp_avg_sq"}; }
  int64_t state_bytes() const;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  std::vector<Tensor> first_, second_;
  float beta1_, beta2_, eps_;
  int64_t steps_ = 0;
};

}  // namespace ddp
