// The device a rank trains on, for every case a node can present, without a
// GPU: the choice is a pure function of the request.
#include "launch/device_binding.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

DeviceRequest Request(const std::string& flag, int local_rank, int local_size, int gpus, bool cuda_training) {
  DeviceRequest r;
  r.flag = flag;
  r.local_rank = local_rank;
  r.local_size = local_size;
  r.visible_gpus = gpus;
  r.cuda_training = cuda_training;
  return r;
}

TEST(DeviceBindingTest, EachLocalRankGetsItsOwnGpu) {
  for (int rank = 0; rank < 4; ++rank) {
    for (const std::string flag : {"auto", "cuda"}) {
      StatusOr<DeviceChoice> c = ChooseDevice(Request(flag, rank, 4, 4, true));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_TRUE(c->cuda);
      EXPECT_EQ(c->gpu, rank);
      EXPECT_EQ(c->description, "cuda:" + std::to_string(rank));
    }
  }
  // More GPUs than ranks (CUDA_VISIBLE_DEVICES not narrowed): the first ones.
  StatusOr<DeviceChoice> c = ChooseDevice(Request("cuda", 1, 2, 8, true));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->gpu, 1);
}

TEST(DeviceBindingTest, AutoFallsBackToCpu) {
  for (const DeviceRequest& r : {Request("auto", 0, 1, 0, true),    // no GPU
                                 Request("auto", 2, 4, 2, true),    // fewer GPUs than local ranks
                                 Request("auto", 0, 2, 2, false)}) {  // no CUDA training in this build
    StatusOr<DeviceChoice> c = ChooseDevice(r);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_FALSE(c->cuda);
    EXPECT_EQ(c->description, "cpu");
  }
  StatusOr<DeviceChoice> c = ChooseDevice(Request("cpu", 0, 2, 2, true));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->cuda);
}

TEST(DeviceBindingTest, ABrokenDriverIsRefusedNotMistakenForNoGpu) {
  for (const std::string flag : {"auto", "cuda"}) {
    DeviceRequest r = Request(flag, 0, 1, 0, true);
    r.cuda_error = "CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)";
    EXPECT_EQ(ChooseDevice(r).status().message(),
              "--device " + flag +
                  ": the NVIDIA driver is installed but CUDA cannot start: CUDA driver version is insufficient for "
                  "CUDA runtime version (cudaErrorInsufficientDriver); fix the driver, or train on the CPU with "
                  "--device cpu");
  }
  DeviceRequest cpu = Request("cpu", 0, 1, 0, true);
  cpu.cuda_error = "initialization error (cudaErrorInitializationError)";
  StatusOr<DeviceChoice> c = ChooseDevice(cpu);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->cuda);
}

TEST(DeviceBindingTest, CudaRefusalsNameTheCause) {
  DeviceRequest none = Request("cuda", 0, 1, 0, true);
  EXPECT_EQ(ChooseDevice(none).status().message(), "--device cuda: no GPU is visible (CUDA_VISIBLE_DEVICES is unset)");
  none.cuda_visible_devices = "";
  EXPECT_EQ(ChooseDevice(none).status().message(), "--device cuda: no GPU is visible (CUDA_VISIBLE_DEVICES='')");

  DeviceRequest few = Request("cuda", 3, 4, 2, true);
  few.cuda_visible_devices = "2,3";
  EXPECT_EQ(ChooseDevice(few).status().message(),
            "--device cuda: 4 ranks on this node but only 2 visible GPUs (CUDA_VISIBLE_DEVICES='2,3'); start one rank "
            "per GPU");

  EXPECT_EQ(ChooseDevice(Request("cuda", 1, 2, 2, false)).status().message(),
            "--device cuda: local rank 1 would train on GPU 1, but this binary was built without CUDA (no nvcc at "
            "build time); use --device cpu");
  EXPECT_EQ(ChooseDevice(Request("tpu", 0, 1, 0, true)).status().message(),
            "--device 'tpu' is unknown; use auto, cpu or cuda");
}

TEST(DeviceBindingTest, OneVisibleGpuPerRankIsUsed) {
  // srun --gpus-per-task=1 or a wrapper: four ranks on the node, each shown
  // one GPU (its own), which is device 0 to it.
  for (int rank = 0; rank < 4; ++rank) {
    for (const std::string flag : {"auto", "cuda"}) {
      StatusOr<DeviceChoice> c = ChooseDevice(Request(flag, rank, 4, 1, true));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_TRUE(c->cuda);
      EXPECT_EQ(c->gpu, 0);
      EXPECT_EQ(c->description, "cuda:0");
    }
  }
}

TEST(DeviceBindingTest, RanksSharingOneGpuAreRefusedOnlyWithNccl) {
  EXPECT_TRUE(CheckGpusNotShared({"GPU-a", "GPU-b", "GPU-c", "GPU-d"}, true).ok());
  EXPECT_TRUE(CheckGpusNotShared({"", "", ""}, true).ok());  // CPU ranks
  EXPECT_TRUE(CheckGpusNotShared({"GPU-a", "GPU-a"}, false).ok());  // --comm mpi may share
  EXPECT_EQ(CheckGpusNotShared({"GPU-a", "GPU-b", "GPU-a"}, true).message(),
            "local ranks 0 and 2 would share GPU GPU-a, and NCCL needs one GPU per rank: start one rank per GPU, or "
            "use --comm mpi");
}

TEST(DeviceBindingTest, CommFollowsTheDevice) {
  DeviceChoice cpu, gpu;
  gpu.cuda = true;
  gpu.gpu = 0;
  EXPECT_EQ(*ChooseComm("auto", cpu), "mpi");
  EXPECT_EQ(*ChooseComm("auto", gpu), "nccl");
  EXPECT_EQ(*ChooseComm("mpi", gpu), "mpi");
  EXPECT_EQ(*ChooseComm("nccl", gpu), "nccl");
  EXPECT_EQ(ChooseComm("nccl", cpu).status().message(),
            "--comm nccl needs GPUs, and this rank trains on cpu; use --comm mpi (the default on CPU)");
  EXPECT_EQ(ChooseComm("gloo", cpu).status().message(), "--comm 'gloo' is unknown; use auto, nccl or mpi");
}

TEST(DeviceBindingTest, PrecisionFollowsTheDevice) {
  DeviceChoice cpu, gpu;
  gpu.cuda = true;
  EXPECT_TRUE(CheckPrecision("fp32", cpu).ok());
  EXPECT_TRUE(CheckPrecision("fp32", gpu).ok());
  EXPECT_TRUE(CheckPrecision("tf32", gpu).ok());
  EXPECT_EQ(CheckPrecision("tf32", cpu).message(),
            "--precision tf32 is a GPU math mode (tensor cores), and this rank trains on cpu; use --precision fp32");
  EXPECT_TRUE(CheckPrecision("bf16", cpu).ok());
  EXPECT_EQ(CheckPrecision("fp16", cpu).message(),
            "--precision fp16 is for GPUs, and this rank trains on cpu; use --precision bf16, the CPU's 16-bit type");
  EXPECT_TRUE(CheckPrecision("bf16", gpu).ok());
  EXPECT_TRUE(CheckPrecision("fp16", gpu).ok());
}

TEST(DeviceBindingTest, CudaGraphsNeedGpusNcclAndNoZero) {
  DeviceChoice cpu, gpu;
  gpu.cuda = true;
  EXPECT_TRUE(CheckCudaGraphs(false, cpu, "mpi", 4, 2).ok());
  EXPECT_TRUE(CheckCudaGraphs(true, gpu, "nccl", 4, 0).ok());
  EXPECT_TRUE(CheckCudaGraphs(true, gpu, "mpi", 1, 0).ok());   // one rank calls no MPI in the step
  EXPECT_EQ(CheckCudaGraphs(true, cpu, "mpi", 1, 0).message(),
            "--cuda-graphs replays GPU work, and this rank trains on cpu; drop --cuda-graphs");
  EXPECT_EQ(CheckCudaGraphs(true, gpu, "mpi", 2, 0).message(),
            "--cuda-graphs with --comm mpi: an MPI call cannot be captured into a CUDA graph; use --comm nccl");
  EXPECT_EQ(CheckCudaGraphs(true, gpu, "nccl", 2, 1).message(),
            "--cuda-graphs with --zero-stage 1 is not supported (ZeRO's parameter gather is waited for inside the "
            "forward); use --zero-stage 0 or drop --cuda-graphs");
}

}  // namespace
}  // namespace ddp
