// A rank's micro-batches, filled in place and staged by the loader: the
// samples the sampler assigns, in run order, with the step's replaced
// samples counted and each batch's first global sample.
#include "launch/input_pipeline.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

// Each sample's index as a tensor; a sample whose index is a multiple of 7
// counts as replaced (a file that would not decode).
class IndexSource : public BatchSource {
 public:
  IndexSource(int64_t size, bool reads_files) : size_(size), reads_files_(reads_files) {}
  int64_t size() const override { return size_; }
  std::vector<TensorSpec> Specs(int64_t count) const override { return {{"index", {count}, DType::kI64}}; }
  void Fill(const int64_t* indices, int64_t count, int64_t epoch, Batch& batch) const override {
    batch.replaced_samples = 0;
    for (int64_t i = 0; i < count; ++i) {
      batch.tensors[0].second.data<int64_t>()[i] = indices[i] + 1000 * epoch;
      if (indices[i] % 7 == 0) ++batch.replaced_samples;
    }
  }
  bool ReadsFiles() const override { return reads_files_; }
  const char* sample_noun() const override { return "samples"; }
  std::string Describe() const override { return "indices"; }

 private:
  int64_t size_;
  bool reads_files_;
};

SamplerOptions Sampling() {
  SamplerOptions s;
  s.dataset_size = 24;
  s.world_size = 2;
  s.rank = 1;
  s.accumulation_steps = 3;
  s.batch_size = 2;
  s.seed = 5;
  return s;
}

void CheckRunOrder(bool reads_files) {
  IndexSource data(24, reads_files);
  GlobalBatchSampler sampler(Sampling()), expected(Sampling());
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  InputPipelineOptions o;
  o.batch_size = 2;
  o.accumulation_steps = 3;
  o.rank = 1;
  o.world_size = 2;
  o.start_step = 1;  // a resumed run starts mid-way
  o.total_steps = 9;  // past one epoch of 2 steps: epochs key the samples
  InputPipeline input(o, &data, &sampler, ctx);
  EXPECT_EQ(input.staged(), reads_files);
  for (int64_t step = 1; step < 9; ++step) {
    input.StartStep();
    int64_t replaced = 0;
    for (int64_t micro = 0; micro < 3; ++micro) {
      const Batch batch = input.Next(step, micro);
      const std::vector<int64_t> want = expected.MicroBatch(step, micro);
      ASSERT_EQ(batch.tensors[0].second.numel(), 2);
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(batch.tensors[0].second.data<int64_t>()[i], want[i] + 1000 * expected.EpochOf(step))
            << "step " << step << " micro " << micro;
        if (want[i] % 7 == 0) ++replaced;
      }
      EXPECT_EQ(batch.step, step);
      EXPECT_EQ(batch.first_sample, (micro * 2 + 1) * 2);  // block micro x world + rank, of 2 samples
    }
    EXPECT_EQ(input.replaced_samples(), replaced) << "step " << step;
    EXPECT_GE(input.wait_seconds(), 0.0);
  }
}

TEST(InputPipelineTest, FilledInPlace) { CheckRunOrder(/*reads_files=*/false); }
TEST(InputPipelineTest, StagedByTheLoader) { CheckRunOrder(/*reads_files=*/true); }

}  // namespace
}  // namespace ddp
