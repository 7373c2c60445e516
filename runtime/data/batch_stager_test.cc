// The host stager (CPU ranks): batches come out in the order queued, equal
// to filling them in place, at most `depth` ahead, each filled with its
// epoch; a slow source shows as the wait Next() reports.
#include "runtime/data/batch_stager.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace ddp {
namespace {

// Sample i of epoch e is the value 1000 e + i; each fill can be slowed.
class CountingSource : public BatchSource {
 public:
  explicit CountingSource(int delay_ms) : delay_ms_(delay_ms) {}
  int64_t size() const override { return 100; }
  std::vector<TensorSpec> Specs(int64_t count) const override { return {{"x", {count}, DType::kI64}}; }
  void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    for (int64_t i = 0; i < count; ++i) batch.Get("x").data<int64_t>()[i] = 1000 * epoch + indices[i];
    batch.replaced_samples = indices[0] % 2;
    ++fills;
  }
  bool ReadsFiles() const override { return true; }
  const char* sample_noun() const override { return "samples"; }
  std::string Describe() const override { return "counting"; }
  mutable std::atomic<int> fills{0};

 private:
  int delay_ms_;
};

TEST(BatchStagerTest, HostBatchesComeInOrderWithTheirEpochAndAtMostDepthAhead) {
  CountingSource source(0);
  BatchStager stager(&source, 3, /*device=*/-1, nullptr, /*depth=*/2);
  EXPECT_EQ(stager.depth(), 2);
  stager.Prefetch({1, 2, 3}, 0);
  stager.Prefetch({4, 5, 6}, 1);
  EXPECT_EQ(stager.queued(), 2);
  for (int64_t step = 0; step < 10; ++step) {
    const Batch& b = stager.Next();
    const int64_t first = 1 + 3 * step;
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(b.Get("x").data<int64_t>()[i], 1000 * step + first + i) << step;
    EXPECT_EQ(b.replaced_samples, first % 2);
    // Two ahead: the batch of step + 2, while this one is held.
    stager.Prefetch({first + 6, first + 7, first + 8}, step + 2);
  }
}

TEST(BatchStagerTest, ASlowSourceShowsAsTheWaitOfNext) {
  CountingSource source(60);
  BatchStager stager(&source, 2, -1, nullptr, 1);
  stager.Prefetch({0, 1}, 0);
  stager.Next();
  EXPECT_GT(stager.last_wait_seconds(), 0.03);
  // Filled ahead while the caller works as long as a fill takes: no wait.
  stager.Prefetch({2, 3}, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  stager.Next();
  EXPECT_LT(stager.last_wait_seconds(), 0.03);
}

}  // namespace
}  // namespace ddp
