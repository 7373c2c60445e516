// The NCCL backend against exact sums, under mpirun, one GPU per rank, on an
// explicit compute stream. Reports SKIPPED without CUDA in the build or
// without a GPU for each rank; the failed-creation case runs wherever the
// build has CUDA (no GPU needed: there every rank fails to bind).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/tensor_testing.h"

#ifdef DDP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#endif

namespace ddp {
namespace {

int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int World() {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return world;
}


TEST(NcclCommunicatorTest, CreateFailingOnOneRankFailsEveryRankWithoutHanging) {
#ifndef DDP_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  // The last rank asks for a device that does not exist.
  const int device = Rank() == World() - 1 ? 999 : 0;
  StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(MPI_COMM_WORLD, device, nullptr);
  ASSERT_FALSE(comm.ok());
  if (Rank() == World() - 1) {
    EXPECT_NE(comm.status().message().find("cudaSetDevice"), std::string::npos) << comm.status().message();
  } else if (cuda::DeviceCount() > 0) {
    EXPECT_NE(comm.status().message().find("rank " + std::to_string(World() - 1) + " failed"), std::string::npos)
        << comm.status().message();
  }
#endif
}

TEST(NcclCommunicatorTest, CollectivesAreExactOnDeviceAndHostTensors) {
  [[maybe_unused]] const int rank = Rank(), world = World();
  DDP_SKIP_WITHOUT_GPUS(world);
#ifdef DDP_HAVE_CUDA
  testing::ComputeStream stream(rank);
  void* compute = stream.get();
  StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(MPI_COMM_WORLD, rank, compute);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  NcclCommunicator& c = **comm;
  const int64_t n = 1000003;
  Tensor host = Tensor::Empty({n * world}, DType::kF32);
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = static_cast<float>((rank + 1) * (i % 1000));
  auto expected = [&](int64_t i) { return static_cast<float>((i % 1000) * world * (world + 1) / 2); };

  Tensor dev = host.To(Device::Cuda(rank));
  ASSERT_TRUE(c.AllReduce(dev, ReduceOp::kSum)->Wait().ok());
  Tensor back = testing::OnCpu(dev);  // on the compute stream, after the wait
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;

  // Reduce-scatter into a separate tensor, then in place; all-gather back.
  dev = host.To(Device::Cuda(rank));
  Tensor shard = Tensor::Empty({n}, DType::kF32, Device::Cuda(rank));
  ASSERT_TRUE(c.ReduceScatter(dev, shard, ReduceOp::kSum)->Wait().ok());
  Tensor gathered = Tensor::Empty({n * world}, DType::kF32, Device::Cuda(rank));
  ASSERT_TRUE(c.AllGather(shard, gathered)->Wait().ok());
  back = testing::OnCpu(gathered);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;
  dev = host.To(Device::Cuda(rank));
  Tensor mine = dev.View(rank * n, {n});
  ASSERT_TRUE(c.ReduceScatter(dev, mine, ReduceOp::kSum)->Wait().ok());
  ASSERT_TRUE(c.AllGather(mine, dev)->Wait().ok());
  back = testing::OnCpu(dev);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;

  // Host tensors are staged: the values are final when Wait returns.
  Tensor scalars = Tensor::FromVector<double>({1.0 * rank, 2.0}, {2});
  ASSERT_TRUE(c.AllReduce(scalars, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(scalars.data<double>()[0], world * (world - 1) / 2.0);
  EXPECT_EQ(scalars.data<double>()[1], 2.0 * world);
  Tensor flags = Tensor::FromVector<int32_t>({rank == 0 ? 1 : 0}, {1});
  ASSERT_TRUE(c.AllReduce(flags, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(flags.data<int32_t>()[0], 1);

  // Coalesced: several tensors of different dtypes in one NCCL group, from
  // the last rank.
  Tensor big_host = Tensor::Empty({300007}, DType::kF32), small_host = Tensor::Empty({7}, DType::kI64);
  for (int64_t i = 0; i < big_host.numel(); ++i) big_host.data<float>()[i] = rank == world - 1 ? i % 1009 : -1.0f;
  for (int64_t i = 0; i < small_host.numel(); ++i) small_host.data<int64_t>()[i] = rank == world - 1 ? 10 * i : -1;
  Tensor big = big_host.To(Device::Cuda(rank)), small = small_host.To(Device::Cuda(rank));
  ASSERT_TRUE(c.BroadcastCoalesced({big, small}, world - 1)->Wait().ok());
  big_host = testing::OnCpu(big);
  small_host = testing::OnCpu(small);
  for (int64_t i = 0; i < big_host.numel(); ++i) ASSERT_EQ(big_host.data<float>()[i], i % 1009) << i;
  for (int64_t i = 0; i < small_host.numel(); ++i) ASSERT_EQ(small_host.data<int64_t>()[i], 10 * i) << i;

  // A Work dropped without Wait still orders the compute stream after it.
  {
    Tensor t = host.To(Device::Cuda(rank));
    c.AllReduce(t, ReduceOp::kSum);
    back = testing::OnCpu(t);
  }
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], expected(i)) << i;

  ASSERT_TRUE(c.Barrier()->Wait().ok());
  ASSERT_TRUE(c.Synchronize().ok());
  cuda::Synchronize(compute);
  comm->reset();
#endif
}

// The abort path, as far as one GPU per rank allows: a collective queued
// behind compute that does not finish within DDP_NCCL_TIMEOUT_S (a busy
// kernel stands in for a dead peer) makes the host's wait return the
// timeout instead of hanging; the communicator is aborted (ncclCommAbort)
// and every later call fails at once with the same reason.
TEST(NcclCommunicatorTest, StuckCollectiveTimesOutAndAbortsTheCommunicator) {
  [[maybe_unused]] const int rank = Rank(), world = World();
  DDP_SKIP_WITHOUT_GPUS(world);
#ifdef DDP_HAVE_CUDA
  const char* before = std::getenv("DDP_NCCL_TIMEOUT_S");
  const std::string saved = before != nullptr ? before : "";
  setenv("DDP_NCCL_TIMEOUT_S", "1", /*overwrite=*/1);
  testing::ComputeStream stream(rank);
  void* compute = stream.get();
  StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(MPI_COMM_WORLD, rank, compute);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  NcclCommunicator& c = **comm;
  Tensor t = Tensor::FromVector<float>({1.0f, 2.0f}, {2}).To(Device::Cuda(rank));
  const double busy_seconds = 4.0;
  cuda::BusyStream(compute, busy_seconds);
  // Issuing does not block the host, nor does Wait (a stream dependency).
  const double start = SteadySeconds();
  EXPECT_TRUE(c.AllReduce(t, ReduceOp::kSum)->Wait().ok());
  const Status stuck = c.Synchronize();
  const double waited = SteadySeconds() - start;
  EXPECT_EQ(stuck.code(), StatusCode::kDeadlineExceeded) << stuck.ToString();
  EXPECT_NE(stuck.message().find("DDP_NCCL_TIMEOUT_S"), std::string::npos) << stuck.message();
  EXPECT_GE(waited, 1.0);
  // ncclCommAbort's frees may wait for the busy kernel, never longer.
  EXPECT_LT(waited, busy_seconds + 3.0);
  const Status later = c.AllReduce(t, ReduceOp::kSum)->Wait();
  EXPECT_EQ(later.message(), stuck.message());
  EXPECT_EQ(c.Synchronize().message(), stuck.message());
  // Released before the compute stream is waited for: the wait watchdog
  // would end the process on the aborted communicator's status.
  comm->reset();
  if (before != nullptr) {
    setenv("DDP_NCCL_TIMEOUT_S", saved.c_str(), 1);
  } else {
    unsetenv("DDP_NCCL_TIMEOUT_S");
  }
#endif
}

}  // namespace
}  // namespace ddp
