// Collectives of the MPI backend with exact expected values, under a real
// mpirun (tests/mpirun_test.sh runs this on 2, 3 and 4 ranks). Sums of
// rank-dependent integers are exact in float, so results compare with ==.
#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <gtest/gtest.h>

namespace ddp {
namespace {

MpiCommunicator& Comm() {
  static MpiCommunicator* comm = new MpiCommunicator(MPI_COMM_WORLD);
  return *comm;
}

// Element i of rank r: (r + 1) * (i % 1000); the sum over ranks is
// (i % 1000) * W(W + 1) / 2.
float Value(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 1000)); }
float Sum(int world, int64_t i) { return static_cast<float>((i % 1000) * world * (world + 1) / 2); }

// Sizes from one element to 64 MiB of floats, none a multiple of anything
// convenient.
class AllReduceSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(AllReduceSizes, SumIsExact) {
  const int64_t n = GetParam();
  MpiCommunicator& c = Comm();
  Tensor t = Tensor::Empty({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = Value(c.rank(), i);
  ASSERT_TRUE(c.AllReduce(t, ReduceOp::kSum)->Wait().ok());
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += t.data<float>()[i] != Sum(c.world_size(), i);
  EXPECT_EQ(wrong, 0) << "of " << n;
}

INSTANTIATE_TEST_SUITE_P(Sizes, AllReduceSizes, ::testing::Values(1, 7, 1023, 65537, 1000003, 16777213));

TEST(MpiCommunicatorTest, AverageAndOtherDtypes) {
  MpiCommunicator& c = Comm();
  const int w = c.world_size();
  const int64_t n = 3001;
  Tensor f = Tensor::Empty({n}, DType::kF32);
  Tensor d = Tensor::Empty({n}, DType::kF64);
  Tensor l = Tensor::Empty({n}, DType::kI64);
  Tensor b = Tensor::Empty({n}, DType::kBF16);
  Tensor h = Tensor::Empty({n}, DType::kF16);
  for (int64_t i = 0; i < n; ++i) {
    f.data<float>()[i] = Value(c.rank(), i);
    d.data<double>()[i] = Value(c.rank(), i) + 0.5;
    l.data<int64_t>()[i] = (int64_t{1} << 40) * (c.rank() + 1) + i;
    // Small integers: exact in bf16 and f16 at every partial sum.
    b.data<BFloat16>()[i] = FloatToBFloat16(static_cast<float>((c.rank() + 1) * (i % 8)));
    h.data<Half>()[i] = FloatToHalf(static_cast<float>((c.rank() + 1) * (i % 8)));
  }
  auto wf = c.AllReduce(f, ReduceOp::kAverage);
  auto wd = c.AllReduce(d, ReduceOp::kSum);
  auto wl = c.AllReduce(l, ReduceOp::kSum);
  auto wb = c.AllReduce(b, ReduceOp::kSum);
  auto wh = c.AllReduce(h, ReduceOp::kSum);
  for (auto* work : {&wf, &wd, &wl, &wb, &wh}) ASSERT_TRUE((*work)->Wait().ok());
  const int64_t triangle = w * (w + 1) / 2;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(f.data<float>()[i], Sum(w, i) / w) << i;
    ASSERT_EQ(d.data<double>()[i], Sum(w, i) + 0.5 * w) << i;
    ASSERT_EQ(l.data<int64_t>()[i], (int64_t{1} << 40) * triangle + w * i) << i;
    ASSERT_EQ(BFloat16ToFloat(b.data<BFloat16>()[i]), static_cast<float>(triangle * (i % 8))) << i;
    ASSERT_EQ(HalfToFloat(h.data<Half>()[i]), static_cast<float>(triangle * (i % 8))) << i;
  }
}

TEST(MpiCommunicatorTest, ReduceScatterGivesEachRankItsBlock) {
  MpiCommunicator& c = Comm();
  const int64_t block = 100003;
  Tensor in = Tensor::Empty({block * c.world_size()}, DType::kF32), out = Tensor::Empty({block}, DType::kF32);
  for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = Value(c.rank(), i);
  ASSERT_TRUE(c.ReduceScatter(in, out, ReduceOp::kSum)->Wait().ok());
  int64_t wrong = 0;
  for (int64_t i = 0; i < block; ++i) wrong += out.data<float>()[i] != Sum(c.world_size(), c.rank() * block + i);
  EXPECT_EQ(wrong, 0);
  // In place: the output is this rank's block of the input.
  for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = Value(c.rank(), i);
  Tensor mine = in.View(c.rank() * block, {block});
  ASSERT_TRUE(c.ReduceScatter(in, mine, ReduceOp::kSum)->Wait().ok());
  for (int64_t i = 0; i < block; ++i) wrong += mine.data<float>()[i] != Sum(c.world_size(), c.rank() * block + i);
  EXPECT_EQ(wrong, 0);
}

TEST(MpiCommunicatorTest, AllGatherPlacesRankRAtBlockR) {
  MpiCommunicator& c = Comm();
  const int64_t block = 77777;
  Tensor in = Tensor::Empty({block}, DType::kF32), out = Tensor::Empty({block * c.world_size()}, DType::kF32);
  for (int64_t i = 0; i < block; ++i) in.data<float>()[i] = static_cast<float>(c.rank() * 100000 + i);
  ASSERT_TRUE(c.AllGather(in, out)->Wait().ok());
  for (int r = 0; r < c.world_size(); ++r) {
    for (int64_t i = 0; i < block; i += 997) ASSERT_EQ(out.data<float>()[r * block + i], r * 100000 + i);
  }
  // In place: the input is this rank's block of the output.
  Tensor inplace = Tensor::Empty({block * c.world_size()}, DType::kF32);
  for (int64_t i = 0; i < inplace.numel(); ++i) inplace.data<float>()[i] = -1.0f;
  Tensor mine = inplace.View(c.rank() * block, {block});
  for (int64_t i = 0; i < block; ++i) mine.data<float>()[i] = static_cast<float>(c.rank() * 100000 + i);
  ASSERT_TRUE(c.AllGather(mine, inplace)->Wait().ok());
  for (int r = 0; r < c.world_size(); ++r) {
    for (int64_t i = 0; i < block; ++i) ASSERT_EQ(inplace.data<float>()[r * block + i], r * 100000 + i);
  }
}

TEST(MpiCommunicatorTest, BroadcastAndBarrier) {
  MpiCommunicator& c = Comm();
  const int root = c.world_size() - 1;
  Tensor t = Tensor::Empty({12345}, DType::kI64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = c.rank() == root ? i * 3 : -1;
  ASSERT_TRUE(c.Broadcast(t, root)->Wait().ok());
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data<int64_t>()[i], i * 3);
  Tensor empty = Tensor::Empty({0}, DType::kF32);
  ASSERT_TRUE(c.Broadcast(empty, 0)->Wait().ok());
  ASSERT_TRUE(c.AllReduce(empty, ReduceOp::kSum)->Wait().ok());
  ASSERT_TRUE(c.Barrier()->Wait().ok());
}

TEST(MpiCommunicatorTest, CoalescedBroadcastOfMixedTensors) {
  // A model's initial state in one operation: a large flat f32 buffer, small
  // f32 buffers, 0-dimensional i64 counters and an empty tensor.
  MpiCommunicator& c = Comm();
  const int root = c.world_size() - 1;
  std::vector<Tensor> tensors = {Tensor::Empty({3000017}, DType::kF32), Tensor::Empty({64}, DType::kF32),
                                 Tensor::Empty({}, DType::kI64), Tensor::Empty({0}, DType::kF32),
                                 Tensor::Empty({5}, DType::kF64)};
  auto expected = [](size_t k, int64_t i) { return static_cast<double>(k * 1000 + (i % 997)); };
  for (size_t k = 0; k < tensors.size(); ++k) {
    Tensor& t = tensors[k];
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = c.rank() == root ? expected(k, i) : -1.0;
      switch (t.dtype()) {
        case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
        case DType::kF64: t.data<double>()[i] = v; break;
        default: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
      }
    }
  }
  ASSERT_TRUE(c.BroadcastCoalesced(tensors, root)->Wait().ok());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double got = t.dtype() == DType::kF32   ? t.data<float>()[i]
                         : t.dtype() == DType::kF64 ? t.data<double>()[i]
                                                    : static_cast<double>(t.data<int64_t>()[i]);
      ASSERT_EQ(got, expected(k, i)) << "tensor " << k << " element " << i;
    }
  }
  ASSERT_TRUE(c.BroadcastCoalesced({}, 0)->Wait().ok());
}

TEST(MpiCommunicatorTest, ManyOutstandingCollectivesRunInIssueOrder) {
  MpiCommunicator& c = Comm();
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 24; ++k) {
    const int64_t n = 1 + k * 4099;
    Tensor t = Tensor::Empty({n}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = Value(c.rank(), i + k);
    tensors.push_back(t);
    works.push_back(c.AllReduce(t, ReduceOp::kSum));
  }
  for (int k = 23; k >= 0; --k) ASSERT_TRUE(works[k]->Wait().ok());
  double previous_finish = 0.0;
  for (int k = 0; k < 24; ++k) {
    for (int64_t i = 0; i < tensors[k].numel(); ++i) ASSERT_EQ(tensors[k].data<float>()[i], Sum(c.world_size(), i + k));
    const WorkTiming timing = works[k]->timing();
    EXPECT_LE(timing.enqueued, timing.started);
    EXPECT_LE(timing.started, timing.finished);
    EXPECT_GE(timing.started, previous_finish);  // FIFO: one after another
    previous_finish = timing.finished;
  }
}

}  // namespace
}  // namespace ddp
