// --comm mpi on GPUs: MPI collectives on CUDA tensors staged through pinned
// host memory, exact sums, every rank on GPU 0 (the one-GPU machine's data
// parallelism). Reports SKIPPED without a GPU.
#include <mpi.h>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "comm/staged_communicator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {
namespace {



TEST(StagedCommunicatorTest, CollectivesOnDeviceTensorsAreExact) {
  DDP_SKIP_WITHOUT_GPU();
  testing::ComputeStream stream(0);
  void* compute = stream.get();
  {
    StagedCommunicator c(std::make_unique<MpiCommunicator>(MPI_COMM_WORLD), 0, compute);
    const int rank = c.rank(), world = c.world_size();
    const int64_t n = 250007;
    Tensor host = Tensor::Empty({n * world}, DType::kF32);
    for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = static_cast<float>((rank + 1) * (i % 1000));
    auto expected = [&](int64_t i) { return static_cast<float>((i % 1000) * world * (world + 1) / 2); };

    Tensor dev = testing::OnGpu(host);
    ASSERT_TRUE(c.AllReduce(dev, ReduceOp::kSum)->Wait().ok());
    Tensor back = testing::OnCpu(dev);
    for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;

    // In place, as ZeRO runs them: this rank's block of the bucket.
    dev = testing::OnGpu(host);
    Tensor mine = dev.View(rank * n, {n});
    ASSERT_TRUE(c.ReduceScatter(dev, mine, ReduceOp::kSum)->Wait().ok());
    back = testing::OnCpu(mine);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back.data<float>()[i], expected(rank * n + i)) << i;
    ASSERT_TRUE(c.AllGather(mine, dev)->Wait().ok());
    back = testing::OnCpu(dev);
    for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;

    Tensor a = testing::OnGpu(Tensor::FromVector<int64_t>({rank == 1 ? 42 : -1, 7}, {2}));
    Tensor b = testing::OnGpu(Tensor::FromVector<double>({rank == 1 ? 0.5 : -1.0}, {1}));
    ASSERT_TRUE(c.BroadcastCoalesced({a, b}, world > 1 ? 1 : 0)->Wait().ok());
    if (world > 1) {
      EXPECT_EQ(testing::OnCpu(a).data<int64_t>()[0], 42);
      EXPECT_EQ(testing::OnCpu(b).data<double>()[0], 0.5);
    }
    Tensor scalar = Tensor::FromVector<double>({1.0}, {1});  // host tensors pass through
    ASSERT_TRUE(c.AllReduce(scalar, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(scalar.data<double>()[0], world);
    cuda::Synchronize(compute);
  }
}

}  // namespace
}  // namespace ddp
