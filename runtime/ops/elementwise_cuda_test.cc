// CUDA elementwise kernels against the CPU implementation on random inputs.
// Reports SKIPPED where no GPU is visible or the build has no CUDA.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/elementwise.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {

using testing::RandomValues;
using testing::ToDoubles;
using testing::ToF32Tensor;

class ElementwiseCudaTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
    cuda::SetDevice(0);
  }

  Tensor ToDevice(const Tensor& host) {
    Tensor d = Tensor::Empty(host.shape(), host.dtype(), Device::Cuda(0));
    cuda::CopyTensor(host, d, nullptr);
    return d;
  }

  std::vector<double> ToHostDoubles(const Tensor& device) {
    Tensor h = Tensor::Empty(device.shape(), device.dtype());
    cuda::CopyTensor(device, h, nullptr);
    return ToDoubles(h);
  }
};

TEST_P(ElementwiseCudaTest, MatchesCpu) {
  const int64_t n = GetParam();
  std::mt19937_64 rng(n);
  Tensor a = ToF32Tensor(RandomValues(n, rng), {n}), b = ToF32Tensor(RandomValues(n, rng), {n});
  ExecutionContext cpu = ExecutionContext::Cpu(2);
  ExecutionContext gpu = ExecutionContext::Cuda(0, nullptr);
  Tensor da = ToDevice(a), db = ToDevice(b);

  Tensor sum = Tensor::Empty({n}, DType::kF32), dsum = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  Add(cpu, a, b, sum);
  Add(gpu, da, db, dsum);
  EXPECT_TRUE(testing::AllClose(ToHostDoubles(dsum), ToDoubles(sum), 0.0, 0.0));

  Axpy(cpu, 0.5f, a, sum);
  Axpy(gpu, 0.5f, da, dsum);
  Scale(cpu, -2.0f, sum);
  Scale(gpu, -2.0f, dsum);
  // FMA contraction on the GPU may differ from the CPU in the last bit.
  EXPECT_TRUE(testing::AllClose(ToHostDoubles(dsum), ToDoubles(sum), 1e-6, 1e-7));

  Tensor y = Tensor::Empty({n}, DType::kF32), dy_dev = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  ReluForward(cpu, a, y);
  ReluForward(gpu, da, dy_dev);
  EXPECT_TRUE(testing::AllClose(ToHostDoubles(dy_dev), ToDoubles(y), 0.0, 0.0));
  Tensor dx = Tensor::Empty({n}, DType::kF32), ddx = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  ReluBackward(cpu, y, b, dx);
  ReluBackward(gpu, dy_dev, db, ddx);
  EXPECT_TRUE(testing::AllClose(ToHostDoubles(ddx), ToDoubles(dx), 0.0, 0.0));
}

// NaN stays NaN through the ReLU and its backward, as on the CPU and in PyTorch.
TEST_P(ElementwiseCudaTest, ReluPropagatesNaN) {
  const int64_t n = GetParam();
  std::mt19937_64 rng(n + 2);
  Tensor x = ToF32Tensor(RandomValues(n, rng), {n});
  x.data<float>()[n / 2] = std::numeric_limits<float>::quiet_NaN();
  if (n > 1) x.data<float>()[n - 1] = std::numeric_limits<float>::infinity();
  ExecutionContext cpu = ExecutionContext::Cpu(2);
  ExecutionContext gpu = ExecutionContext::Cuda(0, nullptr);
  Tensor y = Tensor::Empty({n}, DType::kF32), dy = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  ReluForward(cpu, x, y);
  ReluForward(gpu, ToDevice(x), dy);
  const std::vector<double> got = ToHostDoubles(dy), want = ToDoubles(y);
  ASSERT_TRUE(std::isnan(got[n / 2]));
  for (int64_t i = 0; i < n; ++i) {
    if (i != n / 2) {
      EXPECT_EQ(got[i], want[i]) << i;
    }
  }
  Tensor g = ToF32Tensor(RandomValues(n, rng), {n});
  Tensor dx = Tensor::Empty({n}, DType::kF32), ddx = Tensor::Empty({n}, DType::kF32, Device::Cuda(0));
  ReluBackward(cpu, y, g, dx);
  ReluBackward(gpu, dy, ToDevice(g), ddx);
  EXPECT_TRUE(testing::AllClose(ToHostDoubles(ddx), ToDoubles(dx), 0.0, 0.0));
  EXPECT_EQ(ToHostDoubles(ddx)[n / 2], g.data<float>()[n / 2]);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseCudaTest, ::testing::Values(1, 1000, (1 << 20) + 7));

}  // namespace
}  // namespace ddp
