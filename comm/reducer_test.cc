// The Reducer under a real mpirun: buckets partition the flat gradient
// buffer in backward order within their caps; after a synchronized backward
// every gradient is the average over ranks (bit for bit what one all-reduce
// of the whole buffer gives); no_sync leaves gradients local; compression
// stays within its format's precision.
#include "comm/reducer.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <gtest/gtest.h>

#include "comm/mpi_communicator.h"
#include "comm/zero_reducer.h"
#include "models/registry.h"
#include "runtime/ops/elementwise.h"

namespace ddp {
namespace {

MpiCommunicator& Comm() {
  static MpiCommunicator* comm = new MpiCommunicator(MPI_COMM_WORLD);
  return *comm;
}

std::unique_ptr<Model> SmallResNet() {
  ModelOptions o;
  o.name = "resnet18";
  o.num_classes = 10;
  o.seed = 3;  // same weights on every rank
  return std::move(CreateModel(o)).value();
}

// This rank's own batch and output gradient.
std::pair<Tensor, Tensor> RankBatch(int rank) {
  Tensor x = Tensor::Empty({2, 3, 32, 32}, DType::kF32), dy = Tensor::Empty({2, 10}, DType::kF32);
  std::mt19937_64 rng(100 + rank);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = u(rng);
  return {x, dy};
}

// The average of every rank's local gradients, by one all-reduce; with
// `magnitude`, also the average of their absolute values (the scale of the
// rounding error of a compressed sum).
Tensor ExpectedAverage(ExecutionContext& ctx, Model& model, Tensor* magnitude = nullptr) {
  auto [x, dy] = RankBatch(Comm().rank());
  model.Forward(ctx, x);
  model.Backward(ctx, dy, false);
  Tensor expected = model.flat_gradients().Clone();
  CHECK(Comm().AllReduce(expected, ReduceOp::kAverage)->Wait().ok());
  if (magnitude != nullptr) {
    *magnitude = model.flat_gradients().Clone();
    for (int64_t i = 0; i < magnitude->numel(); ++i) magnitude->data<float>()[i] = std::fabs(magnitude->data<float>()[i]);
    CHECK(Comm().AllReduce(*magnitude, ReduceOp::kAverage)->Wait().ok());
  }
  return expected;
}

class ReducerTest : public ::testing::TestWithParam<double> {};

TEST_P(ReducerTest, AveragesGradientsAcrossRanksInOrderedBuckets) {
  const double bucket_mb = GetParam();
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> model = SmallResNet();
  const Tensor expected = ExpectedAverage(ctx, *model);
  ReducerOptions options;
  options.bucket_mb = bucket_mb;
  options.first_bucket_mb = bucket_mb / 4;
  Reducer reducer(&Comm(), model.get(), options);

  // Buckets tile the flat buffer from its end downwards, within their caps:
  // --bucket-mb bounds every bucket (a larger parameter is split), and the
  // first closes once it reaches its own.
  int64_t end = model->num_parameters();
  int split = 0;
  for (size_t b = 0; b < reducer.buckets().size(); ++b) {
    const Reducer::Bucket& bucket = reducer.buckets()[b];
    EXPECT_EQ(bucket.offset + bucket.numel, end) << "bucket " << b;
    end = bucket.offset;
    EXPECT_LE(4.0 * bucket.numel, options.bucket_mb * 1048576.0) << "bucket " << b << " overfull";
    if (b == 0 && !bucket.split) {
      EXPECT_LT(4.0 * (bucket.numel - NumElements(bucket.params.back()->shape)), options.first_bucket_mb * 1048576.0);
    }
    split += bucket.split;
    EXPECT_TRUE(!bucket.split || bucket.params.size() == 1) << "bucket " << b;
  }
  EXPECT_EQ(end, 0);
  if (bucket_mb < 1.0) EXPECT_GT(split, 10);  // most of ResNet-18's weights are split

  auto [x, dy] = RankBatch(Comm().rank());
  for (int step = 0; step < 2; ++step) {
    model->Forward(ctx, x);
    reducer.PrepareForBackward(true);
    model->Backward(ctx, dy, false);
    StatusOr<ReduceStats> stats = reducer.Wait();
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->buckets.size(), reducer.buckets().size());
    EXPECT_EQ(std::memcmp(model->flat_gradients().raw_data(), expected.raw_data(), expected.nbytes()), 0)
        << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(BucketSizes, ReducerTest, ::testing::Values(0.05, 4.0, 1000.0));

TEST(ReducerTest, PrescaledGradientsAreSummed) {
  // The trainer's mode: each rank's gradient is already divided by the world
  // size (through the loss gradient); the reducer sums.
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> model = SmallResNet();
  const Tensor expected = ExpectedAverage(ctx, *model);
  ReducerOptions options;
  options.gradients_prescaled = true;
  Reducer reducer(&Comm(), model.get(), options);
  auto [x, dy] = RankBatch(Comm().rank());
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] /= static_cast<float>(Comm().world_size());
  model->Forward(ctx, x);
  reducer.PrepareForBackward(true);
  model->Backward(ctx, dy, false);
  ASSERT_TRUE(reducer.Wait().ok());
  // Dividing before the backward pass instead of after rounds differently
  // (exactly alike only for powers of two): compare each parameter
  // normwise.
  int64_t offset = 0;
  for (Parameter* p : model->parameters()) {
    const float* got = model->flat_gradients().data<float>() + offset;
    const float* want = expected.data<float>() + offset;
    double max_want = 0.0, max_diff = 0.0;
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      max_want = std::max(max_want, std::fabs(static_cast<double>(want[i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_LE(max_diff, 1e-5 * max_want) << p->name;
    offset += p->value.numel();
  }
}

TEST(ReducerTest, NoSyncKeepsGradientsLocal) {
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> model = SmallResNet();
  auto [x, dy] = RankBatch(Comm().rank());
  model->Forward(ctx, x);
  model->Backward(ctx, dy, false);
  const Tensor local = model->flat_gradients().Clone();
  Reducer reducer(&Comm(), model.get(), ReducerOptions());
  model->Forward(ctx, x);
  reducer.PrepareForBackward(false);
  model->Backward(ctx, dy, false);
  EXPECT_EQ(std::memcmp(model->flat_gradients().raw_data(), local.raw_data(), local.nbytes()), 0);
}

// One synchronized backward of this rank's batch through `reducer`.
template <typename R>
void SyncedBackward(ExecutionContext& ctx, Model& model, R& reducer) {
  auto [x, dy] = RankBatch(Comm().rank());
  model.Forward(ctx, x);
  reducer.PrepareForBackward(true);
  model.Backward(ctx, dy, false);
  ASSERT_TRUE(reducer.Wait().ok());
}

// How far a compressed sum may stray, relative to the sum of magnitudes:
// each rank's value rounds once and each partial sum once more, at most
// (world + 1) roundings, each within half an ulp (f16 also flushes below
// its subnormal step 2^-24, which the callers add).
double WireBound(DType wire) {
  const double unit = wire == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  return unit * (Comm().world_size() + 1);
}

// With 1 MiB buckets (dozens of them), the three wire buffers are each
// reused many times while backward runs, and hold no more than three of
// the largest bucket.
TEST(ReducerTest, CompressedWireStaysWithinItsPrecision) {
  for (const auto& [wire, bucket_mb] : std::vector<std::pair<DType, double>>{
           {DType::kBF16, 25.0}, {DType::kF16, 25.0}, {DType::kBF16, 1.0}, {DType::kF16, 1.0}}) {
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    std::unique_ptr<Model> model = SmallResNet();
    Tensor magnitude;
    const Tensor expected = ExpectedAverage(ctx, *model, &magnitude);
    ReducerOptions options;
    options.wire_dtype = wire;
    options.bucket_mb = bucket_mb;
    options.first_bucket_mb = bucket_mb / 4;
    Reducer reducer(&Comm(), model.get(), options);
    int64_t largest = 0;
    for (const Reducer::Bucket& b : reducer.buckets()) largest = std::max(largest, b.numel);
    EXPECT_EQ(reducer.wire_bytes(), Reducer::kWireBuffers * largest * 2) << DTypeName(wire) << " " << bucket_mb;
    if (bucket_mb < 2.0) EXPECT_GT(reducer.buckets().size(), 3u * Reducer::kWireBuffers);
    SyncedBackward(ctx, *model, reducer);
    const double bound = WireBound(wire);
    const float* got = model->flat_gradients().data<float>();
    const float* want = expected.data<float>();
    const float* scale = magnitude.data<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      bad += std::fabs(got[i] - want[i]) > bound * scale[i] + std::ldexp(1.0, -24);
    }
    EXPECT_EQ(bad, 0) << DTypeName(wire) << " " << bucket_mb;
  }
}

// Marks every gradient ready by hand, in `order`, as a backward pass that
// computed them in that order would.
template <typename R>
void MarkAll(R& reducer, const std::vector<Parameter*>& order) {
  for (Parameter* p : order) {
    reducer.PrepareGradient(*p);
    EXPECT_TRUE(p->grad.defined()) << p->name;  // a layer writes it (Layer::GradientTarget)
    reducer.MarkGradientReady(*p);
  }
}

// The first synchronized backward checks the gradient-ready order against
// the static one. Rank 1 sees its gradients in registration order (as a
// model whose backward ran forwards would): it names the first mismatch,
// every other rank fails too, naming how many ranks disagreed. Nobody hangs.
template <typename R, typename... Args>
void ExpectOrderMismatchFailsEveryRank(Args&&... args) {
  if (Comm().world_size() < 2) GTEST_SKIP() << "needs two ranks";
  std::unique_ptr<Model> model = SmallResNet();
  R reducer(&Comm(), model.get(), std::forward<Args>(args)...);
  std::vector<Parameter*> order = model->BackwardOrder();
  if (Comm().rank() == 1) std::reverse(order.begin(), order.end());
  reducer.PrepareForBackward(true);
  MarkAll(reducer, order);
  StatusOr<ReduceStats> stats = reducer.Wait();
  ASSERT_FALSE(stats.ok());
  const std::string message = stats.status().ToString();
  if (Comm().rank() == 1) {
    EXPECT_NE(message.find("order differs from the static backward order at position 0: expected fc.bias, got conv1.weight"),
              std::string::npos)
        << message;
  } else {
    EXPECT_NE(message.find("1 other rank(s) saw gradients arrive out of the static backward order"), std::string::npos)
        << message;
  }
}

TEST(ReducerTest, OutOfOrderGradientsFailEveryRank) { ExpectOrderMismatchFailsEveryRank<Reducer>(ReducerOptions()); }

// Runs `check` with the options of ZeRO stage 1, then of stages 2 and 3.
template <typename Check>
void ForEachZeroStage(Check check) {
  for (int stage : {1, 2, 3}) {
    ZeroOptions options;
    options.stage = stage;
    options.bucket_mb = 4.0;
    SCOPED_TRACE("stage " + std::to_string(stage));
    check(options);
  }
}

// ZeRO's compressed reduce-scatter: with 1 MiB buckets (dozens of them)
// the three 16-bit wire buffers are reused many times (stage 1 too, whose
// f32 bucket buffers persist), and every rank's pieces hold the sum of the
// ranks' gradients within the format's precision (as the DDP test above).
TEST(ReducerTest, ZeroCompressedWireStaysWithinItsPrecision) {
  ForEachZeroStage([](ZeroOptions options) {
    for (DType wire : {DType::kBF16, DType::kF16}) {
      ExecutionContext ctx = ExecutionContext::Cpu(1);
      std::unique_ptr<Model> model = SmallResNet();
      Tensor magnitude;
      const Tensor expected = ExpectedAverage(ctx, *model, &magnitude);
      const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
      options.wire_dtype = wire;
      options.bucket_mb = 1.0;
      options.first_bucket_mb = 0.25;
      ZeroReducer reducer(&Comm(), model.get(), options);
      ASSERT_GT(reducer.buckets().size(), 3u * ZeroReducer::kBuffersInFlight);
      int64_t largest = 0;
      for (const ZeroReducer::Bucket& b : reducer.buckets()) largest = std::max(largest, b.shard * Comm().world_size());
      const int64_t f32_pool = options.stage >= 2 ? ZeroReducer::kBuffersInFlight * largest * 4 : 0;
      EXPECT_EQ(reducer.transient_bytes(), f32_pool + ZeroReducer::kBuffersInFlight * largest * 2) << DTypeName(wire);
      SyncedBackward(ctx, *model, reducer);
      const double world = Comm().world_size(), bound = WireBound(wire);
      int64_t bad = 0, compared = 0;
      for (const OptimizerSlot& slot : reducer.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
        const int64_t at = offsets.at(model->parameters()[slot.param_index]) + slot.offset;
        for (int64_t i = 0; i < slot.grad.numel(); ++i, ++compared) {
          const double want = world * expected.data<float>()[at + i], scale = world * magnitude.data<float>()[at + i];
          bad += std::fabs(slot.grad.data<float>()[i] - want) > bound * scale + world * std::ldexp(1.0, -24);
        }
      }
      EXPECT_EQ(bad, 0) << DTypeName(wire);
      // The ranks' pieces cover every parameter once.
      Tensor total = Tensor::FromVector<int64_t>({compared}, {1});
      ASSERT_TRUE(Comm().AllReduce(total, ReduceOp::kSum)->Wait().ok());
      EXPECT_EQ(total.data<int64_t>()[0], model->num_parameters()) << DTypeName(wire);
    }
  });
}

// Buckets of 0.5 MiB split most of ResNet-18's weights (layer4's 9 MiB
// convolutions into 19 buckets each). Every stage still sums what one
// all-reduce sums (bit for bit at 2 ranks; at 3 the order of the sum may
// differ: within 2^-21 of the sum of magnitudes); every bucket and the pool stay within the cap (each
// bucket padded to a multiple of the world size); stages 2 and 3 hold a
// split parameter's gradient whole only while backward writes it and its
// buckets are reduced, releasing each once they arrived.
TEST(ReducerTest, ZeroSplitParametersAreSummedWithinTheCap) {
  ForEachZeroStage([](ZeroOptions options) {
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    std::unique_ptr<Model> model = SmallResNet();
    Tensor magnitude;
    ExpectedAverage(ctx, *model, &magnitude);  // leaves the local gradients
    Tensor expected = model->flat_gradients().Clone();
    ASSERT_TRUE(Comm().AllReduce(expected, ReduceOp::kSum)->Wait().ok());
    const double rounding = Comm().world_size() == 2 ? 0.0 : std::ldexp(1.0, -21) * Comm().world_size();
    const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
    options.bucket_mb = 0.5;
    options.first_bucket_mb = 0.125;
    const int world = Comm().world_size();
    int64_t largest_split = 0, all_split = 0;
    for (const Parameter* p : model->parameters()) {
      if (p->value.nbytes() <= 524288) continue;
      largest_split = std::max(largest_split, ShardSize(p->value.numel(), world) * world * 4);
      all_split += ShardSize(p->value.numel(), world) * world * 4;
    }
    ZeroReducer reducer(&Comm(), model.get(), options);
    int split = 0;
    for (const ZeroReducer::Bucket& b : reducer.buckets()) {
      split += b.split;
      EXPECT_LE(b.shard * world * 4, 524288 + 4 * world);
    }
    EXPECT_GT(split, 40);
    if (options.stage >= 2) EXPECT_LE(reducer.transient_bytes(), ZeroReducer::kBuffersInFlight * (524288 + 4 * world));
    for (int step = 0; step < 2; ++step) {
      SyncedBackward(ctx, *model, reducer);
      // At least the largest whole, at most all at once (how many overlap
      // depends on when their reduce-scatters arrive).
      if (options.stage >= 2) {
        EXPECT_GE(reducer.split_gradient_peak_bytes(), largest_split);
        EXPECT_LE(reducer.split_gradient_peak_bytes(), all_split);
      } else {
        EXPECT_EQ(reducer.split_gradient_peak_bytes(), 0);
      }
      int64_t bad = 0, compared = 0;
      for (const OptimizerSlot& slot : reducer.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
        const int64_t at = offsets.at(model->parameters()[slot.param_index]) + slot.offset;
        for (int64_t i = 0; i < slot.grad.numel(); ++i, ++compared) {
          bad += std::fabs(slot.grad.data<float>()[i] - expected.data<float>()[at + i]) >
                 rounding * magnitude.data<float>()[at + i];
        }
      }
      EXPECT_EQ(bad, 0) << "step " << step;
      Tensor total = Tensor::FromVector<int64_t>({compared}, {1});
      ASSERT_TRUE(Comm().AllReduce(total, ReduceOp::kSum)->Wait().ok());
      EXPECT_EQ(total.data<int64_t>()[0], model->num_parameters());
      // Stages 2 and 3: the split parameters' gradient buffers are freed.
      for (const Parameter* p : model->parameters()) {
        if (options.stage >= 2 && NumElements(p->shape) * 4 > 524288) EXPECT_FALSE(p->grad.defined()) << p->name;
      }
    }
  });
}

TEST(ReducerTest, ZeroOutOfOrderGradientsFailEveryRank) {
  ForEachZeroStage([](const ZeroOptions& options) { ExpectOrderMismatchFailsEveryRank<ZeroReducer>(options); });
}

// A gradient that never arrives: the first backward fails on every rank (the
// rank that missed it names its bucket and a parameter); the static order
// check passes once and is not repeated, so a later complete backward works.
template <typename R, typename... Args>
void ExpectMissingGradientFails(Args&&... args) {
  std::unique_ptr<Model> model = SmallResNet();
  R reducer(&Comm(), model.get(), std::forward<Args>(args)...);
  std::vector<Parameter*> order = model->BackwardOrder();
  reducer.PrepareForBackward(true);
  MarkAll(reducer, std::vector<Parameter*>(order.begin(), order.end() - 1));  // conv1.weight missing
  StatusOr<ReduceStats> stats = reducer.Wait();
  ASSERT_FALSE(stats.ok());
  const std::string message = stats.status().ToString();
  const int last = static_cast<int>(reducer.buckets().size()) - 1;
  EXPECT_NE(message.find("bucket " + std::to_string(last) + " is missing 1 gradient(s), e.g. of conv1.weight"),
            std::string::npos)
      << message;
  reducer.PrepareForBackward(true);
  MarkAll(reducer, order);
  EXPECT_TRUE(reducer.Wait().ok());
}

TEST(ReducerTest, MissingGradientFails) { ExpectMissingGradientFails<Reducer>(ReducerOptions()); }

TEST(ReducerTest, ZeroMissingGradientFails) {
  ForEachZeroStage([](const ZeroOptions& options) { ExpectMissingGradientFails<ZeroReducer>(options); });
}

// ZeRO's parameter all-gather overlaps the next forward: launched after the
// update, each bucket is copied into place when the forward first reads one
// of its parameters. Each rank writes the new values only into the pieces it
// owns (as its optimizer would) and garbage everywhere else; the forward must
// then compute exactly what a model holding the new values everywhere does,
// and afterwards every parameter holds its new value.
TEST(ReducerTest, ZeroParameterGatherCompletesDuringForward) {
  ForEachZeroStage([](const ZeroOptions& options) {
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    std::unique_ptr<Model> model = SmallResNet();
    std::unique_ptr<Model> reference = SmallResNet();
    ZeroReducer zero(&Comm(), model.get(), options);
    ASSERT_GT(zero.buckets().size(), 2u);
    const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
    const int64_t n = model->num_parameters();
    float* updated = reference->flat_parameters().data<float>();
    for (int64_t i = 0; i < n; ++i) updated[i] = 0.02f * std::sin(0.37f * static_cast<float>(i));
    // Stale values that the gather must overwrite (stage 3 keeps only its
    // pieces from here on).
    model->flat_parameters().Fill(1000.0);
    ASSERT_TRUE(zero.ShardParameters(/*from_root=*/false).ok());
    for (const OptimizerSlot& slot : zero.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      const int64_t at = offsets.at(model->parameters()[slot.param_index]) + slot.offset;
      for (int64_t i = 0; i < slot.value.numel(); ++i) slot.value.data<float>()[i] = updated[at + i];
    }
    auto [x, dy] = RankBatch(Comm().rank());
    const Tensor want = reference->Forward(ctx, x);

    ASSERT_TRUE(zero.LaunchParameterGather().ok());
    const Tensor got = model->Forward(ctx, x);
    ASSERT_TRUE(zero.FinishParameterGather().ok());
    EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0);
    ASSERT_TRUE(zero.GatherMasterWeights().ok());  // stage 3: every parameter, gathered for the moment
    EXPECT_EQ(std::memcmp(model->flat_parameters().data<float>(), updated, static_cast<size_t>(n) * sizeof(float)), 0);
  });
}

// Mixed precision with 16-bit gathers: each rank keeps only its pieces of
// the f32 master weights, at every stage, and the gathers rebuild the
// working copy from them: every 16-bit weight is its new value rounded
// (rearranged channels-last where the model keeps it so), and every
// parameter the forward reads in f32 holds its new value exactly, though
// no rank holds the flat f32 parameters. Stages 1 and 2 keep the working
// copy whole, gathered after the update; stage 3 gathers each bucket as a
// pass reads it and holds none afterwards. GatherMasterWeights makes the
// masters whole for the moment (stage 3 also the 16-bit copy).
TEST(ReducerTest, ZeroMixedPrecisionKeepsOnlyItsMasterPieces) {
  if (Comm().world_size() < 2) GTEST_SKIP() << "needs two ranks";
  for (const auto& [stage, format] : std::vector<std::pair<int, MemoryFormat>>{
           {1, MemoryFormat::kContiguous}, {2, MemoryFormat::kContiguous},
           {3, MemoryFormat::kContiguous}, {3, MemoryFormat::kChannelsLast}}) {
    SCOPED_TRACE("stage " + std::to_string(stage) + (format == MemoryFormat::kChannelsLast ? ", channels-last" : ""));
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    std::unique_ptr<Model> model = SmallResNet();
    model->EnableLowPrecision(ctx, DType::kBF16, format);
    const int64_t n = model->num_parameters(), copy_bytes = model->low_precision_bytes();
    int64_t f32_reads = 0;
    for (const Parameter* p : model->parameters()) f32_reads += p->forward_reads_f32 ? NumElements(p->shape) : 0;
    ASSERT_GT(f32_reads, 0);
    ZeroOptions options;
    options.stage = stage;
    options.bucket_mb = 1.0;  // split weights too
    options.first_bucket_mb = 0.25;
    options.gather_dtype = DType::kBF16;
    ZeroReducer zero(&Comm(), model.get(), options);
    ASSERT_TRUE(zero.shards_masters());
    ASSERT_TRUE(zero.ShardParameters(/*from_root=*/false).ok());
    EXPECT_FALSE(model->flat_parameters().defined());
    EXPECT_EQ(model->low_precision_bytes(), stage == 3 ? 0 : copy_bytes + f32_reads * 4);
    int64_t pieces = 0;
    for (const ZeroReducer::Bucket& b : zero.buckets()) pieces += b.shard * 4;
    EXPECT_EQ(zero.master_bytes(), pieces);
    const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
    for (int round = 0; round < 2; ++round) {
      std::vector<float> updated(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) updated[i] = 0.02f * std::sin(0.37f * static_cast<float>(i) + round);
      int64_t owned = 0;
      for (const OptimizerSlot& slot : zero.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
        const int64_t at = offsets.at(model->parameters()[slot.param_index]) + slot.offset;
        for (int64_t i = 0; i < slot.value.numel(); ++i) slot.value.data<float>()[i] = updated[at + i];
        owned += slot.value.numel();
      }
      Tensor total = Tensor::FromVector<int64_t>({owned}, {1});
      ASSERT_TRUE(Comm().AllReduce(total, ReduceOp::kSum)->Wait().ok());
      EXPECT_EQ(total.data<int64_t>()[0], n);
      const Tensor all = Tensor::FromVector<float>(updated, {n});
      Tensor rounded = Tensor::Empty({n}, DType::kBF16);
      CastScaled(ctx, all, 1.0f, rounded);
      // p's working values: its 16-bit copy, and its f32 value if read so.
      auto expect_working = [&](const Parameter& p) {
        const int64_t at = offsets.at(&p), size = NumElements(p.shape);
        ASSERT_TRUE(p.low.defined()) << p.name;
        EXPECT_EQ(p.low.format(), model->LowPrecisionFormat(p)) << p.name;
        Tensor want = Tensor::Empty(p.shape, DType::kBF16, Device::Cpu(), p.low.format());
        if (p.low.channels_last()) {
          ConvertLayout(ctx, rounded.View(at, p.shape), want);
        } else {
          want.CopyFrom(rounded.View(at, p.shape));
        }
        EXPECT_EQ(std::memcmp(p.low.raw_data(), want.raw_data(), size * 2), 0) << p.name;
        if (!p.forward_reads_f32) return;
        ASSERT_TRUE(p.value.defined()) << p.name;
        EXPECT_EQ(std::memcmp(p.value.raw_data(), &updated[at], size * 4), 0) << p.name;
      };
      ASSERT_TRUE(zero.LaunchParameterGather().ok());
      if (stage == 3) {
        // A forward's pass: each parameter gathered as it is read.
        for (const Parameter* p : model->parameters()) {
          zero.PrepareParameter(*p);
          expect_working(*p);
        }
        ASSERT_TRUE(zero.FinishParameterGather().ok());
        EXPECT_GT(zero.gathered_peak_bytes(), 0);
      } else {
        ASSERT_TRUE(zero.FinishParameterGather().ok());
        for (const Parameter* p : model->parameters()) expect_working(*p);
      }
      ASSERT_TRUE(zero.GatherMasterWeights().ok());
      ASSERT_TRUE(model->flat_parameters().defined());
      EXPECT_EQ(std::memcmp(model->flat_parameters().raw_data(), updated.data(), n * 4), 0);
      EXPECT_EQ(model->low_precision_bytes(), copy_bytes);
      for (const Parameter* p : model->parameters()) expect_working(*p);
      zero.ReleaseMasterWeights();
      EXPECT_FALSE(model->flat_parameters().defined());
      EXPECT_EQ(model->low_precision_bytes(), stage == 3 ? 0 : copy_bytes + f32_reads * 4);
      if (stage < 3) {
        for (const Parameter* p : model->parameters()) expect_working(*p);
      }
    }
  }
}

// The start-up broadcast where ZeRO shards the master weights: every rank
// starts from different values, and after ShardParameters(from_root) each
// rank's pieces are rank 0's values exactly (a bucket broadcast at a time;
// with 1 MiB buckets the largest weights split), no rank keeps the flat
// parameters, and at stages 1 and 2 the gathered working copy is rank 0's
// values rounded (f32-read parameters exact).
TEST(ReducerTest, ZeroStartsEveryRankFromRankZerosPieces) {
  if (Comm().world_size() < 2) GTEST_SKIP() << "needs two ranks";
  for (const auto& [stage, dtype] : std::vector<std::pair<int, DType>>{
           {1, DType::kBF16}, {2, DType::kBF16}, {3, DType::kBF16}, {3, DType::kF32}}) {
    SCOPED_TRACE("stage " + std::to_string(stage) + ", " + DTypeName(dtype));
    ExecutionContext ctx = ExecutionContext::Cpu(1);
    std::unique_ptr<Model> model = SmallResNet();
    const int64_t n = model->num_parameters();
    // Rank 0's values, and another rank's: its own.
    auto value = [](int rank, int64_t i) { return 0.01f * (rank + 1) * std::sin(0.29f * static_cast<float>(i)); };
    for (int64_t i = 0; i < n; ++i) model->flat_parameters().data<float>()[i] = value(Comm().rank(), i);
    if (dtype != DType::kF32) model->EnableLowPrecision(ctx, dtype);
    ZeroOptions options;
    options.stage = stage;
    options.bucket_mb = 1.0;
    options.first_bucket_mb = 0.25;
    options.gather_dtype = dtype;
    options.ctx = ctx;
    ZeroReducer zero(&Comm(), model.get(), options);
    ASSERT_TRUE(zero.shards_masters());
    ASSERT_TRUE(zero.ShardParameters(/*from_root=*/true).ok());
    EXPECT_FALSE(model->flat_parameters().defined());
    const std::unordered_map<const Parameter*, int64_t> offsets = FlatOffsets(*model);
    int64_t wrong = 0, owned = 0;
    for (const OptimizerSlot& slot : zero.OptimizerSlots([](const Parameter&) { return 0.0f; })) {
      const int64_t at = offsets.at(model->parameters()[slot.param_index]) + slot.offset;
      for (int64_t i = 0; i < slot.value.numel(); ++i) wrong += slot.value.data<float>()[i] != value(0, at + i);
      owned += slot.value.numel();
    }
    EXPECT_EQ(wrong, 0);
    Tensor total = Tensor::FromVector<int64_t>({owned}, {1});
    ASSERT_TRUE(Comm().AllReduce(total, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(total.data<int64_t>()[0], n);
    if (stage == 3) continue;
    for (const Parameter* p : model->parameters()) {
      const int64_t at = offsets.at(p), size = NumElements(p->shape);
      std::vector<float> want(static_cast<size_t>(size));
      for (int64_t i = 0; i < size; ++i) want[i] = value(0, at + i);
      Tensor rounded = Tensor::Empty({size}, dtype);
      CastScaled(ctx, Tensor::FromVector<float>(want, {size}), 1.0f, rounded);
      ASSERT_TRUE(p->low.defined()) << p->name;
      EXPECT_EQ(std::memcmp(p->low.raw_data(), rounded.raw_data(), size * 2), 0) << p->name;
      if (p->forward_reads_f32) EXPECT_EQ(std::memcmp(p->value.raw_data(), want.data(), size * 4), 0) << p->name;
    }
  }
}

}  // namespace
}  // namespace ddp
