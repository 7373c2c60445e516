// A collective that fails on one rank poisons that rank's communicator: the
// collectives queued after it report the first failure and move nothing, so
// no later receive can take a peer's stale message for its own. Rank 1's
// first ring step refuses its send (the DDP_TEST_FAIL_ISEND hook) after
// posting its receive; rank 0 issues nothing and so never waits. Without
// the poisoning, rank 1's second collective would wait for rank 0 until
// the test's timeout.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"

namespace ddp {
namespace {

TEST(MpiCommunicatorFailureTest, CollectivesAfterAFailureReportItAndMoveNothing) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ASSERT_EQ(world, 2);
  if (rank == 1) setenv("DDP_TEST_FAIL_ISEND", "1:1", 1);
  {
    MpiCommunicator c(MPI_COMM_WORLD);
    if (rank == 1) {
      Tensor in = Tensor::Empty({8}, DType::kF32), out = Tensor::Empty({4}, DType::kF32);
      for (int64_t i = 0; i < 8; ++i) in.data<float>()[i] = static_cast<float>(i);
      // EXPECT, not ASSERT: rank 0 waits in the barrier below.
      const Status first = c.ReduceScatter(in, out, ReduceOp::kSum)->Wait();
      EXPECT_FALSE(first.ok());
      EXPECT_NE(first.message().find("MPI_Isend refused (DDP_TEST_FAIL_ISEND)"), std::string::npos) << first.message();
      // Queued after the failure: reported, not run (its input untouched).
      Tensor t = Tensor::Empty({5}, DType::kF32);
      for (int64_t i = 0; i < 5; ++i) t.data<float>()[i] = 7.0f;
      const Status later = c.AllReduce(t, ReduceOp::kSum)->Wait();
      EXPECT_FALSE(later.ok());
      EXPECT_NE(later.message().find("not run: an earlier collective on this communicator failed"), std::string::npos)
          << later.message();
      EXPECT_NE(later.message().find("DDP_TEST_FAIL_ISEND"), std::string::npos) << later.message();
      for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(t.data<float>()[i], 7.0f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace ddp
