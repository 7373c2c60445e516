#include "runtime/tensor.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(TensorTest, EmptyHasShapeDtypeAndSize) {
  Tensor t = Tensor::Empty({2, 3, 5}, DType::kBF16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.dim(-1), 5);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(t.DebugString(), "bf16[2, 3, 5] cpu");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % CpuAllocator::kAlignment, 0u);
}

TEST(TensorTest, SizesAre64Bit) {
  // Shape arithmetic must not overflow 32 bits (no allocation happens here).
  EXPECT_EQ(NumElements({1 << 20, 1 << 12, 3}), int64_t{3} << 32);
}

TEST(TensorTest, ZeroDimensionalTensorHasOneElement) {
  Tensor t = Tensor::Zeros({}, DType::kI64);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.data<int64_t>()[0], 0);
}

TEST(TensorTest, ViewsShareStorage) {
  Tensor flat = Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  Tensor weight = flat.View(2, {2, 3});
  EXPECT_EQ(weight.storage(), flat.storage());
  EXPECT_EQ(weight.data<float>()[0], 2.0f);
  weight.data<float>()[5] = 42.0f;
  EXPECT_EQ(flat.data<float>()[7], 42.0f);
  Tensor reshaped = weight.Reshape({6});
  EXPECT_EQ(reshaped.data<float>()[5], 42.0f);
}

TEST(TensorTest, ReinterpretAsReadsTheSameBytes) {
  Tensor bytes = Tensor::Zeros({16}, DType::kU8);
  Tensor floats = bytes.ReinterpretAs(DType::kF32, {2, 2});
  floats.data<float>()[1] = 1.0f;  // 0x3f800000, little-endian
  EXPECT_EQ(bytes.data<uint8_t>()[7], 0x3f);
  EXPECT_EQ(floats.storage(), bytes.storage());
}

TEST(TensorDeathTest, ReinterpretBeyondTheViewFails) {
  Tensor bytes = Tensor::Zeros({7}, DType::kU8);
  EXPECT_DEATH(bytes.ReinterpretAs(DType::kF32, {2}), "exceeds");
}

TEST(TensorTest, CloneIsIndependent) {
  Tensor a = Tensor::FromVector<int32_t>({1, 2, 3}, {3});
  Tensor b = a.Clone();
  b.data<int32_t>()[0] = 7;
  EXPECT_EQ(a.data<int32_t>()[0], 1);
  EXPECT_EQ(b.GetAsDouble(0), 7.0);
}

TEST(TensorTest, FillConvertsToEachDtype) {
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
    Tensor t = Tensor::Empty({4}, d);
    t.Fill(3.0);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(t.GetAsDouble(i), 3.0) << DTypeName(d);
  }
}

TEST(TensorTest, AllocatorCountsBytes) {
  CpuAllocator* allocator = GetCpuAllocator();
  const int64_t before = allocator->bytes_in_use();
  {
    Tensor t = Tensor::Empty({1000}, DType::kF64);
    EXPECT_EQ(allocator->bytes_in_use(), before + 8000);
    EXPECT_GE(allocator->peak_bytes_in_use(), before + 8000);
  }
  EXPECT_EQ(allocator->bytes_in_use(), before);
}

TEST(CpuAllocatorTest, LargeBlocksAreReusedAndSizesRoundToEighths) {
  EXPECT_EQ(CpuAllocator::RoundedSize(100), 128u);
  EXPECT_EQ(CpuAllocator::RoundedSize(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(CpuAllocator::RoundedSize((size_t{1} << 20) + 1), (size_t{1} << 20) + (size_t{1} << 17));
  EXPECT_EQ(CpuAllocator::RoundedSize(size_t{3} << 20), size_t{3} << 20);
  CpuAllocator allocator;
  void* a = allocator.Allocate(5 << 20);
  allocator.Deallocate(a, 5 << 20);
  EXPECT_EQ(allocator.cached_bytes(), 5 << 20);
  EXPECT_EQ(allocator.bytes_in_use(), 0);
  // A request that rounds to the same block size gets the cached block.
  void* b = allocator.Allocate((5 << 20) - 1000);
  EXPECT_EQ(b, a);
  EXPECT_EQ(allocator.cached_bytes(), 0);
  allocator.Deallocate(b, (5 << 20) - 1000);
  allocator.ReleaseCache();
  EXPECT_EQ(allocator.cached_bytes(), 0);
}

TEST(AllocatorTest, LimitIsExactAndOutOfMemoryIsOneLine) {
  CpuAllocator allocator;
  allocator.set_limit_bytes(1000);
  void* a = allocator.Allocate(600);
  void* b = allocator.Allocate(400);  // exactly at the cap
  EXPECT_EQ(allocator.bytes_in_use(), 1000);
  allocator.Deallocate(b, 400);
  SetOutOfMemoryContext("training resnet50 at --batch-size 64; try a smaller --batch-size");
  EXPECT_EXIT(allocator.Allocate(401), ::testing::ExitedWithCode(1),
              "^out of memory on cpu asking for 401 B \\(600 B in tensors, 600 B reserved, --device-memory-limit "
              "1000 B\\) training resnet50 at --batch-size 64; try a smaller --batch-size\n$");
  SetOutOfMemoryContext("");
  allocator.Deallocate(a, 600);
  allocator.set_limit_bytes(0);
  void* big = allocator.Allocate(5000);  // no cap
  allocator.Deallocate(big, 5000);
}

TEST(ActivationLimitTest, PastTwoToThe31InsideALayerIsOneLine) {
  const Shape big = {3, 1 << 30};  // 3.2e9 elements, never allocated: refused first
  // Outside a layer (datasets, flat buffers) nothing is limited.
  CheckActivationSize(big, DType::kF32);
  const std::string name = "layer1.0.conv1";
  ActivationScope scope(name, "forward");
  CheckActivationSize({2, 1 << 30}, DType::kU8);  // raw bytes: scratch, not an activation
  CheckActivationSize({1, kMaxActivationElements}, DType::kF32);  // exactly at the bound
  SetActivationBatchSize(4096);
  EXPECT_EXIT(CheckActivationSize(big, DType::kBF16), ::testing::ExitedWithCode(1),
              "^layer1.0.conv1 forward: a \\[3, 1073741824\\] bf16 activation \\(3221225472 elements\\) is past "
              "the 2\\^31 - 1 elements that cuDNN and this runtime's kernels take; it fits at --batch-size 2730 or "
              "less \\(from 4096\\)\n$");
  SetActivationBatchSize(0);
}

TEST(TensorDeathTest, WrongDtypeAccessNamesBoth) {
  Tensor t = Tensor::Empty({2}, DType::kF32);
  EXPECT_DEATH(t.data<int64_t>(), "tensor is f32, accessed as i64");
}

TEST(TensorDeathTest, ViewOutOfRange) {
  Tensor t = Tensor::Empty({4}, DType::kF32);
  EXPECT_DEATH(t.View(2, {3}), "exceeds");
}

}  // namespace
}  // namespace ddp
