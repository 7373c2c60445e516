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
            "--device cuda: local rank 1 would train on GPU 1, but CUDA training is not in this build yet; use "
            "--device cpu");
  EXPECT_EQ(ChooseDevice(Request("tpu", 0, 1, 0, true)).status().message(),
            "--device 'tpu' is unknown; use auto, cpu or cuda");
}

}  // namespace
}  // namespace ddp
