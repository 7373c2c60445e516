// One rank's checkpoints: when one is due, a snapshot written, committed and
// resumed into a fresh model and optimizer bit for bit (weights, momentum,
// step count, loss scale), and the resume checks' refusals.
#include "launch/train_checkpoints.h"

#include <sys/stat.h>

#include <cstring>

#include <gtest/gtest.h>

#include "models/registry.h"

namespace ddp {
namespace {

TEST(TrainCheckpointsTest, Due) {
  TrainCheckpointsOptions o;
  o.dir = std::string(::testing::TempDir()) + "/due";
  o.every = 3;
  ProgressPrinter progress(0, false);
  StatusOr<std::unique_ptr<TrainCheckpoints>> c = TrainCheckpoints::Create(o, nullptr, &progress);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c)->Due(3, false));
  EXPECT_TRUE((*c)->Due(6, false));
  EXPECT_FALSE((*c)->Due(4, false));
  EXPECT_TRUE((*c)->Due(4, true));  // a stop always checkpoints
  o.dir += "_never";
  o.every = 0;
  c = TrainCheckpoints::Create(o, nullptr, &progress);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->Due(3, false));
  EXPECT_TRUE((*c)->Due(3, true));
}

// A model with its SGD optimizer and loss scaler, as the trainer builds them.
struct Training {
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LossScaler> scaler;
  std::vector<SlotPlace> places;
  explicit Training(uint64_t seed) {
    ModelOptions m;
    m.name = "bert-tiny";
    m.seed = seed;
    model = std::move(CreateModel(m).value());
    std::vector<OptimizerSlot> slots;
    int index = 0;
    for (Parameter* p : model->parameters()) {
      slots.push_back({p->name, p->value, p->grad, 0.0f, index++});
      places.push_back({p->name, 0, p->value.numel()});
    }
    SgdOptions sgd;
    sgd.momentum = 0.9f;
    optimizer = MakeSgd(std::move(slots), sgd);
    LossScalerOptions dynamic;
    dynamic.mode = LossScalerOptions::Mode::kDynamic;
    scaler = std::make_unique<LossScaler>(dynamic);
  }
  CheckpointedState State() {
    return {model.get(), optimizer.get(), scaler.get(), nullptr, 0, places, /*global_batch=*/8, 25.0, 1.0};
  }
};

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TrainCheckpointsOptions Options(const std::string& dir, bool resume) {
  TrainCheckpointsOptions o;
  o.dir = dir;
  o.resume = resume;
  o.model = "bert-tiny";
  o.optimizer = "sgd";
  o.batch_size = 8;
  return o;
}

TEST(TrainCheckpointsTest, WrittenCommittedAndResumedBitForBit) {
  const std::string dir = std::string(::testing::TempDir()) + "/round_trip";
  ProgressPrinter progress(0, false);
  Training trained(/*seed=*/1);
  {
    StatusOr<std::unique_ptr<TrainCheckpoints>> c = TrainCheckpoints::Create(Options(dir, false), nullptr, &progress);
    ASSERT_TRUE(c.ok()) << c.status().message();
    StatusOr<int64_t> start = (*c)->ResumeModel(*trained.model, 8, 100);
    ASSERT_TRUE(start.ok());
    EXPECT_EQ(*start, 0);  // no --resume
    (*c)->Attach(trained.State());
    // Two SGD steps make momentum; a skipped step and growth move the scaler.
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    for (int step = 0; step < 2; ++step) {
      for (Parameter* p : trained.model->parameters()) p->grad.Fill(0.25 + step);
      ASSERT_TRUE(trained.optimizer->Step(ctx, 0.1f).ok());
    }
    trained.scaler->Update(/*found_nonfinite=*/true);
    ASSERT_TRUE((*c)->Begin(5).ok());
    EXPECT_TRUE((*c)->pending());
    EXPECT_EQ((*c)->pending_step(), 5);
    ASSERT_TRUE((*c)->Finish().ok());
    EXPECT_FALSE((*c)->pending());
  }
  struct stat st;
  ASSERT_EQ(::stat((dir + "/step_00000005/manifest.pb").c_str(), &st), 0);

  Training resumed(/*seed=*/2);  // other initial weights
  StatusOr<std::unique_ptr<TrainCheckpoints>> c = TrainCheckpoints::Create(Options(dir, true), nullptr, &progress);
  ASSERT_TRUE(c.ok()) << c.status().message();
  StatusOr<int64_t> start = (*c)->ResumeModel(*resumed.model, 8, 100);
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(*start, 5);
  ASSERT_NE((*c)->resumed(), nullptr);
  (*c)->Attach(resumed.State());
  ASSERT_TRUE((*c)->ResumeOptimizer().ok());
  EXPECT_TRUE(SameBytes(resumed.model->flat_parameters(), trained.model->flat_parameters()));
  const std::vector<Tensor> want = trained.optimizer->state(), got = resumed.optimizer->state();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(SameBytes(got[i], want[i])) << "momentum of slot " << i;
  EXPECT_EQ(resumed.optimizer->steps(), 2);
  EXPECT_EQ(resumed.scaler->scale(), trained.scaler->scale());
  EXPECT_EQ(resumed.scaler->skipped_steps(), 1);

  // Refused: another global batch, nothing left to train.
  Training other(3);
  StatusOr<int64_t> refused = (*c)->ResumeModel(*other.model, 4, 100);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("was written at a global batch of 8 (1 ranks x 1 micro-batches x 8), "
                                            "this run's is 4"),
            std::string::npos)
      << refused.status().message();
  refused = (*c)->ResumeModel(*other.model, 8, 5);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is at step 5, and this run ends at step 5: nothing is left to train"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace ddp
