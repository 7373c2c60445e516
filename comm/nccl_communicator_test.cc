// The NCCL backend against exact sums, under mpirun, one GPU per rank.
// Reports SKIPPED without CUDA in the build or without a GPU for each rank.
#include <mpi.h>

#include <gtest/gtest.h>

#include "runtime/cuda/cuda_device.h"

#ifdef DDP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#endif

namespace ddp {
namespace {

TEST(NcclCommunicatorTest, AllReduceReduceScatterAllGatherBroadcastAreExact) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (cuda::DeviceCount() < world) {
    GTEST_SKIP() << (cuda::BuiltWithCuda() ? "fewer GPUs than ranks" : "built without CUDA");
  }
#ifdef DDP_HAVE_CUDA
  cuda::SetDevice(rank);
  StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(MPI_COMM_WORLD, rank, nullptr);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  NcclCommunicator& c = **comm;
  const int64_t n = 1000003;
  Tensor host = Tensor::Empty({n * world}, DType::kF32);
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = static_cast<float>((rank + 1) * (i % 1000));
  Tensor dev = Tensor::Empty(host.shape(), DType::kF32, Device::Cuda(rank));
  cuda::CopyTensor(host, dev, nullptr);
  ASSERT_TRUE(c.AllReduce(dev, ReduceOp::kSum)->Wait().ok());
  Tensor back = Tensor::Empty(host.shape(), DType::kF32);
  cuda::CopyTensor(dev, back, nullptr);
  for (int64_t i = 0; i < back.numel(); ++i) {
    ASSERT_EQ(back.data<float>()[i], static_cast<float>((i % 1000) * world * (world + 1) / 2)) << i;
  }
  Tensor shard = Tensor::Empty({n}, DType::kF32, Device::Cuda(rank));
  cuda::CopyTensor(host, dev, nullptr);
  ASSERT_TRUE(c.ReduceScatter(dev, shard, ReduceOp::kSum)->Wait().ok());
  Tensor gathered = Tensor::Empty({n * world}, DType::kF32, Device::Cuda(rank));
  ASSERT_TRUE(c.AllGather(shard, gathered)->Wait().ok());
  cuda::CopyTensor(gathered, back, nullptr);
  for (int64_t i = 0; i < back.numel(); ++i) {
    ASSERT_EQ(back.data<float>()[i], static_cast<float>((i % 1000) * world * (world + 1) / 2)) << i;
  }
  ASSERT_TRUE(c.Broadcast(dev, 0)->Wait().ok());
  // Coalesced: several tensors of different dtypes in one NCCL group, from
  // the last rank.
  Tensor big_host = Tensor::Empty({300007}, DType::kF32), small_host = Tensor::Empty({7}, DType::kI64);
  for (int64_t i = 0; i < big_host.numel(); ++i) big_host.data<float>()[i] = rank == world - 1 ? i % 1009 : -1.0f;
  for (int64_t i = 0; i < small_host.numel(); ++i) small_host.data<int64_t>()[i] = rank == world - 1 ? 10 * i : -1;
  Tensor big = Tensor::Empty(big_host.shape(), DType::kF32, Device::Cuda(rank));
  Tensor small = Tensor::Empty(small_host.shape(), DType::kI64, Device::Cuda(rank));
  cuda::CopyTensor(big_host, big, nullptr);
  cuda::CopyTensor(small_host, small, nullptr);
  ASSERT_TRUE(c.BroadcastCoalesced({big, small}, world - 1)->Wait().ok());
  cuda::Synchronize(nullptr);
  cuda::CopyTensor(big, big_host, nullptr);
  cuda::CopyTensor(small, small_host, nullptr);
  for (int64_t i = 0; i < big_host.numel(); ++i) ASSERT_EQ(big_host.data<float>()[i], i % 1009) << i;
  for (int64_t i = 0; i < small_host.numel(); ++i) ASSERT_EQ(small_host.data<int64_t>()[i], 10 * i) << i;
  ASSERT_TRUE(c.Barrier()->Wait().ok());
  cuda::Synchronize(nullptr);
#endif
}

}  // namespace
}  // namespace ddp
