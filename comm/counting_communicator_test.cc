// The bytes counted for each collective, worked out by hand for a ring of
// 4 ranks (a meta communicator: shapes checked, nothing moved), and
// nothing on one rank.
#include "comm/counting_communicator.h"

#include <gtest/gtest.h>

#include "comm/meta_communicator.h"

namespace ddp {
namespace {

Tensor Meta(int64_t n, DType dtype = DType::kF32) { return Tensor::Empty({n}, dtype, Device::Meta()); }

TEST(CountingCommunicatorTest, CountsWhatARingSends) {
  MetaCommunicator meta(/*rank=*/1, /*world=*/4);
  CountingCommunicator comm(&meta);
  ASSERT_TRUE(comm.AllReduce(Meta(1000), ReduceOp::kSum)->Wait().ok());             // 2 * 3/4 * 4000
  Tensor whole = Meta(4000, DType::kBF16);                                        // 8000 bytes
  ASSERT_TRUE(comm.ReduceScatter(whole, whole.View(1000, {1000}), ReduceOp::kSum)->Wait().ok());  // 3/4 * 8000
  ASSERT_TRUE(comm.AllGather(whole.View(1000, {1000}), whole)->Wait().ok());         // 3/4 * 8000
  ASSERT_TRUE(comm.Broadcast(Meta(400), 0)->Wait().ok());                            // 3/4 * 1600
  ASSERT_TRUE(comm.BroadcastCoalesced({Meta(40), Meta(8, DType::kI64)}, 0)->Wait().ok());  // 3/4 * (160 + 64)
  const Traffic t = comm.sent();
  EXPECT_EQ(t.all_reduce, 6000);
  EXPECT_EQ(t.reduce_scatter, 6000);
  EXPECT_EQ(t.all_gather, 6000);
  EXPECT_EQ(t.broadcast, 1200 + 120 + 48);
  EXPECT_EQ(t.total(), 18000 + 1368);
  // A step's share is a difference of two readings.
  ASSERT_TRUE(comm.AllReduce(Meta(10), ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ((comm.sent() - t).all_reduce, 60);
  EXPECT_EQ((comm.sent() - t).total(), 60);
}

TEST(CountingCommunicatorTest, OneRankSendsNothing) {
  MetaCommunicator meta(0, 1);
  CountingCommunicator comm(&meta);
  ASSERT_TRUE(comm.AllReduce(Meta(1000), ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(comm.sent(), Traffic());
}

}  // namespace
}  // namespace ddp
