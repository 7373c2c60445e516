// The fused CUDA optimizers against the CPU ones: several slots of odd
// sizes (one spanning several chunks), per-slot weight decay, 3 steps of
// SGD (momentum, Nesterov), AdamW and LAMB (whose norms sum over a
// parameter's slots: two slots share a parameter here, as ZeRO pieces do).
// Weights within 1e-5 relative to their largest magnitude. SKIPPED without
// a GPU.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/optim/cuda/optimizer_kernels.h"
#include "runtime/optim/optimizer.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

struct Slots {
  std::vector<Tensor> values, grads;
  std::vector<OptimizerSlot> slots;
};

// Sizes: a chunk and a bit, small, odd; slots 2 and 3 are pieces of one
// parameter (index 2).
const int64_t kSizes[] = {cuda::kOptimizerChunk + 17, 5, 1000, 3};
const float kDecay[] = {0.01f, 0.0f, 0.05f, 0.05f};
const int kParam[] = {0, 1, 2, 2};

Slots MakeSlots(Device device, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Slots s;
  for (int k = 0; k < 4; ++k) {
    Tensor v = testing::ToF32Tensor(testing::RandomValues(kSizes[k], rng), {kSizes[k]});
    Tensor on = Tensor::Empty(v.shape(), DType::kF32, device), g = Tensor::Zeros(v.shape(), DType::kF32, device);
    on.CopyFrom(v);
    s.values.push_back(on);
    s.grads.push_back(g);
    s.slots.push_back({"slot" + std::to_string(k), on, g, kDecay[k], kParam[k]});
  }
  return s;
}

void SetGradients(Slots& s, std::mt19937_64& rng) {
  for (Tensor& g : s.grads) g.CopyFrom(testing::ToF32Tensor(testing::RandomValues(g.numel(), rng), g.shape()));
}

::testing::AssertionResult Close(const Tensor& gpu, const Tensor& cpu) {
  Tensor host = Tensor::Empty(gpu.shape(), DType::kF32);
  host.CopyFrom(gpu);
  double scale = 0.0, worst = 0.0;
  for (int64_t i = 0; i < cpu.numel(); ++i) scale = std::max(scale, std::fabs(cpu.GetAsDouble(i)));
  for (int64_t i = 0; i < cpu.numel(); ++i) worst = std::max(worst, std::fabs(host.GetAsDouble(i) - cpu.GetAsDouble(i)));
  if (worst <= 1e-5 * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "worst difference " << worst << " against scale " << scale;
}

using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<OptimizerSlot>)>;

void Compare(const Factory& make) {
  ExecutionContext cpu = ExecutionContext::Cpu(2), gpu = ExecutionContext::Cuda(0, nullptr);
  Slots c = MakeSlots(Device::Cpu(), 3), g = MakeSlots(Device::Cuda(0), 3);
  std::unique_ptr<Optimizer> on_cpu = make(c.slots), on_gpu = make(g.slots);
  std::mt19937_64 rng_c(9), rng_g(9);
  for (int step = 0; step < 3; ++step) {
    SetGradients(c, rng_c);
    SetGradients(g, rng_g);
    ASSERT_TRUE(on_cpu->Step(cpu, 0.05f).ok());
    ASSERT_TRUE(on_gpu->Step(gpu, 0.05f).ok());
  }
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(Close(g.values[k], c.values[k])) << "slot " << k;
  EXPECT_EQ(on_gpu->state_bytes(), on_cpu->state_bytes());
}

class OptimizerCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
    cuda::SetDevice(0);
  }
};

TEST_F(OptimizerCudaTest, SgdMatchesCpu) {
  for (bool nesterov : {false, true}) {
    for (float momentum : {0.0f, 0.9f}) {
      SgdOptions o;
      o.momentum = momentum;
      o.nesterov = nesterov && momentum != 0.0f;
      Compare([&](std::vector<OptimizerSlot> s) { return MakeSgd(std::move(s), o); });
    }
  }
}

TEST_F(OptimizerCudaTest, AdamWMatchesCpu) {
  Compare([](std::vector<OptimizerSlot> s) { return MakeAdamW(std::move(s), AdamWOptions()); });
}

TEST_F(OptimizerCudaTest, LambMatchesCpu) {
  Compare([](std::vector<OptimizerSlot> s) { return MakeLamb(std::move(s), LambOptions(), 3); });
}

}  // namespace
}  // namespace ddp
