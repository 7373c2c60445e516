// Run under mpirun (1 and 3 ranks): every vote summed exactly across the
// ranks in the one all-reduce, and AgreeOnStatus's three outcomes.
#include "launch/step_agreement.h"

#include <mpi.h>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"

namespace ddp {
namespace {

// Rank r's votes: every field distinct from every other, so a vote left
// out of the wire (or read back into another field) shows.
StepVotes VotesOf(int r) {
  StepVotes v;
  v.loss = 0.5 + r;
  v.failed = r == 1 ? 1 : 0;
  v.nonfinite = r >= 1 ? 1 : 0;
  v.tokens = (int64_t{1} << 40) + 7 * r;
  v.checkpoint_durable = r != 2 ? 1 : 0;
  v.checkpoint_failed = r == 2 ? 1 : 0;
  v.stop = r == 0 ? 1 : 0;
  v.input_wait_s = 0.25 * (r + 1);
  v.replaced_samples = 3 * r + 11;
  return v;
}

class StepAgreementTest : public ::testing::Test {
 protected:
  void SetUp() override { comm_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD); }
  std::unique_ptr<MpiCommunicator> comm_;
};

TEST_F(StepAgreementTest, SumsEveryVoteExactly) {
  const int world = comm_->world_size();
  StepVotes expected;
  for (int r = 0; r < world; ++r) {
    const StepVotes v = VotesOf(r);
    expected.loss += v.loss;
    expected.failed += v.failed;
    expected.nonfinite += v.nonfinite;
    expected.tokens += v.tokens;
    expected.checkpoint_durable += v.checkpoint_durable;
    expected.checkpoint_failed += v.checkpoint_failed;
    expected.stop += v.stop;
    expected.input_wait_s += v.input_wait_s;
    expected.replaced_samples += v.replaced_samples;
  }
  StatusOr<StepVotes> sum = SumStepVotes(comm_.get(), VotesOf(comm_->rank()));
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum->loss, expected.loss);
  EXPECT_EQ(sum->failed, expected.failed);
  EXPECT_EQ(sum->nonfinite, expected.nonfinite);
  EXPECT_EQ(sum->tokens, expected.tokens);
  EXPECT_EQ(sum->checkpoint_durable, expected.checkpoint_durable);
  EXPECT_EQ(sum->checkpoint_failed, expected.checkpoint_failed);
  EXPECT_EQ(sum->stop, expected.stop);
  EXPECT_EQ(sum->input_wait_s, expected.input_wait_s);
  EXPECT_EQ(sum->replaced_samples, expected.replaced_samples);
  if (world == 3) {  // the figures worked by hand
    EXPECT_EQ(sum->loss, 4.5);
    EXPECT_EQ(sum->tokens, 3 * (int64_t{1} << 40) + 21);
    EXPECT_EQ(sum->nonfinite, 2);
    EXPECT_EQ(sum->replaced_samples, 42);
  }
}

TEST_F(StepAgreementTest, OneRankWithoutACommunicatorKeepsItsVotes) {
  const StepVotes mine = VotesOf(comm_->rank());
  StatusOr<StepVotes> same = SumStepVotes(nullptr, mine);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->loss, mine.loss);
  EXPECT_EQ(same->tokens, mine.tokens);
  EXPECT_EQ(same->replaced_samples, mine.replaced_samples);
  EXPECT_EQ(same->input_wait_s, mine.input_wait_s);
}

TEST_F(StepAgreementTest, AgreeOnStatus) {
  const int rank = comm_->rank(), world = comm_->world_size();
  EXPECT_TRUE(AgreeOnStatus(comm_.get(), Status::Ok(), "unused").ok());
  // The last rank fails: it keeps its own error, the others get the line.
  const Status mine = rank == world - 1 ? InvalidArgument("rank's own error") : Status::Ok();
  const Status agreed = AgreeOnStatus(comm_.get(), mine, "another rank failed to do it; stopping");
  ASSERT_FALSE(agreed.ok());
  if (rank == world - 1) {
    EXPECT_EQ(agreed.message(), "rank's own error");
  } else {
    EXPECT_EQ(agreed.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(agreed.message(), "another rank failed to do it; stopping");
  }
  EXPECT_EQ(AgreeOnStatus(nullptr, InvalidArgument("alone"), "unused").message(), "alone");
  EXPECT_TRUE(AgreeOnStatus(nullptr, Status::Ok(), "unused").ok());
}

}  // namespace
}  // namespace ddp
