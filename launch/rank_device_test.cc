// Run under mpirun (1 and 2 ranks): each rank's device settled with the
// others. CPU ranks here; a GPU machine's choices are device_binding_test's
// and the self-test's.
#include "launch/rank_device.h"

#include <mpi.h>

#include <string>

#include <gtest/gtest.h>

#include "runtime/ops/conv2d.h"

namespace ddp {
namespace {

class RankDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &ranks_.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_.world_size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &ranks_.local_rank);
    MPI_Comm_size(node_, &ranks_.local_size);
  }
  void TearDown() override { MPI_Comm_free(&node_); }

  Status Settle(TrainOptions* options) {
    return SettleDevice(ranks_, MPI_COMM_WORLD, node_, options, &device_, &visible_gpus_);
  }

  RankInfo ranks_;
  MPI_Comm node_ = MPI_COMM_NULL;
  DeviceChoice device_;
  int visible_gpus_ = -1;
};

TEST_F(RankDeviceTest, CpuRanksTakeMpiAndTheCpuDescription) {
  TrainOptions o;
  o.device = "cpu";
  o.comm = "auto";
  ASSERT_TRUE(Settle(&o).ok());
  EXPECT_FALSE(device_.cuda);
  EXPECT_EQ(device_.gpu, -1);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.comm, "mpi");
  EXPECT_EQ(visible_gpus_, 0);  // --device cpu asks the driver nothing
}

// bf16 stays where the CPU runs it natively and falls back to fp32 (and f32
// gradients on the wire, when compression was auto) elsewhere.
TEST_F(RankDeviceTest, Bf16OnTheCpuFallsBackWithoutNativeSupport) {
  TrainOptions o;
  o.device = "cpu";
  o.precision = "bf16";
  o.grad_compression_auto = true;
  o.wire_dtype = DType::kBF16;
  ASSERT_TRUE(Settle(&o).ok());
  if (CpuHasFastBf16()) {
    EXPECT_EQ(o.precision, "bf16");
    EXPECT_EQ(o.wire_dtype, DType::kBF16);
  } else {
    EXPECT_EQ(o.precision, "fp32");
    EXPECT_EQ(o.wire_dtype, DType::kF32);
  }
}

// A refusal on one rank is every rank's: the last rank asks for CUDA graphs
// on the CPU; the others hear which rank failed and why.
TEST_F(RankDeviceTest, OneRanksRefusalFailsEveryRank) {
  TrainOptions o;
  o.device = "cpu";
  o.cuda_graphs = ranks_.rank == ranks_.world_size - 1;
  const Status s = Settle(&o);
  ASSERT_FALSE(s.ok());
  const std::string why = "--cuda-graphs replays GPU work, and this rank trains on cpu; drop --cuda-graphs";
  if (ranks_.rank == ranks_.world_size - 1) {
    EXPECT_EQ(s.message(), why);
  } else {
    EXPECT_EQ(s.message(), "rank " + std::to_string(ranks_.world_size - 1) + " failed: " + why);
  }
}

TEST_F(RankDeviceTest, UnknownCommIsRefusedNamingTheFlag) {
  TrainOptions o;
  o.device = "cpu";
  o.comm = "gloo";
  const Status s = Settle(&o);
  EXPECT_EQ(s.message(), "--comm 'gloo' is unknown; use auto, nccl or mpi");
}

TEST_F(RankDeviceTest, CpuRanksProbeNoPeerAccess) {
  TrainOptions o;
  o.device = "cpu";
  StatusOr<PeerAccessDecision> d = DecideNodePeerAccess(ranks_, node_, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state, "not applicable");
  EXPECT_FALSE(d->set_p2p_disable);
  ExplainNotApplicable(DeviceChoice(), 0, ranks_, o, &*d);
  EXPECT_EQ(d->reason, "");  // a CPU rank's start line says nothing of peers
}

TEST(ExplainNotApplicableTest, NamesWhyAGpuRankDidNotProbe) {
  DeviceChoice gpu;
  gpu.cuda = true;
  gpu.gpu = 0;
  TrainOptions o;
  RankInfo one_local;
  one_local.local_size = 1;
  RankInfo two_local;
  two_local.local_size = 2;
  auto reason = [&](int visible, const RankInfo& r, const std::string& comm) {
    PeerAccessDecision d;
    o.comm = comm;
    ExplainNotApplicable(gpu, visible, r, o, &d);
    return d.reason;
  };
  EXPECT_EQ(reason(1, two_local, "nccl"), "single GPU: not applicable");
  EXPECT_EQ(reason(4, one_local, "nccl"), "one rank on this node: not applicable");
  EXPECT_EQ(reason(4, two_local, "mpi"), "--comm mpi: NCCL does not join the GPUs");
  PeerAccessDecision probed;
  probed.state = "usable";
  probed.reason = "GPUs 0-1 reach each other";
  ExplainNotApplicable(gpu, 4, two_local, o, &probed);
  EXPECT_EQ(probed.reason, "GPUs 0-1 reach each other");  // a probe's finding stands
}

}  // namespace
}  // namespace ddp
