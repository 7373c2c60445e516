// ResNet-18 trained on the GPU follows the CPU path: the same start, data
// and flags (--zero-init-residual, lr 0.02, fp32 with --deterministic, no
// TF32), per-step losses within 1e-4 relative over 4 SGD steps, and the
// GPU run repeats itself bit for bit. Also ZeRO-free AdamW and accumulation
// with evaluation; and mixed precision: bf16 and fp16 (dynamic loss
// scaling) on the GPU, channels-last and NCHW, follow the CPU's f32 losses
// within 3e-2, skip no step at this scale and repeat bit for bit under
// --deterministic; and --cuda-graphs: the replayed steps' losses (fp32 and
// fp16, generated and staged data, with accumulation, re-captures when the
// loss scale changes, evaluation after replays) equal the eager run's bit
// for bit under --deterministic. BERT (bert-tiny, MLM + NSP, dropout on,
// padded sequences through the batch stager) follows the CPU's losses and
// repeats itself bit for bit. Reports SKIPPED without a GPU.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launch/small_runs.h"
#include "launch/trainer.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/data/synthetic_images.h"
#include "runtime/safetensors.h"
#include "runtime/testing/gpu_testing.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

struct RunResult {
  std::vector<double> losses;
  double eval_accuracy = -1.0;
  int64_t skipped_steps = 0;
  DType compute_dtype = DType::kF32;
  std::string memory_format;
  int64_t graph_captures = -1;  // the summary's, under --cuda-graphs
  int64_t graphed_steps = 0;    // step records marked "cuda_graph"
};

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

RunResult Train(TrainOptions options, bool gpu, const std::string& tag) {
  options.metrics_file = testing::TempPath("resnet_cuda_" + tag + ".jsonl");
  std::optional<testing::ComputeStream> stream;
  if (gpu) {
    options.gpu = 0;
    stream.emplace(0);
  }
  RunResult result;
  {
    StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(options, nullptr, RankInfo(), stream ? stream->get() : nullptr);
    CHECK(trainer.ok()) << trainer.status().ToString();
    StatusOr<TrainResult> r = (*trainer)->Run();
    CHECK(r.ok()) << r.status().ToString();
    result.eval_accuracy = r->eval_accuracy;
    result.skipped_steps = r->skipped_steps;
    result.compute_dtype = r->compute_dtype;
  }
  stream.reset();
  std::ifstream in(options.metrics_file);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("loss")) result.losses.push_back(record["loss"].get<double>());
    if (record.contains("cuda_graph")) ++result.graphed_steps;
    if (!record.contains("summary")) continue;
    result.memory_format = record["summary"]["memory_format"].get<std::string>();
    if (record["summary"].contains("cuda_graph_captures")) {
      result.graph_captures = record["summary"]["cuda_graph_captures"].get<int64_t>();
    }
  }
  return result;
}

TrainOptions ResNet18() {
  TrainOptions o = SmallResNet18Run();
  o.image_size = 64;
  o.deterministic = true;
  return o;
}

class ResNetCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDP_SKIP_WITHOUT_GPU();
  }
};

void ExpectLossesClose(const std::vector<double>& gpu, const std::vector<double>& cpu, double tolerance) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_LE(std::fabs(gpu[i] - cpu[i]), tolerance * std::fabs(cpu[i])) << "step " << i + 1 << ": gpu " << gpu[i]
                                                                         << ", cpu " << cpu[i];
  }
}

TEST_F(ResNetCudaTest, Fp32DeterministicFollowsCpuLossesAndRepeats) {
  const TrainOptions o = ResNet18();
  const RunResult cpu = Train(o, false, "cpu");
  const RunResult gpu = Train(o, true, "gpu");
  ExpectLossesClose(gpu.losses, cpu.losses, 1e-4);
  const RunResult again = Train(o, true, "gpu_again");
  EXPECT_EQ(again.losses, gpu.losses) << "--deterministic runs differ";
}

TEST_F(ResNetCudaTest, AdamWWithAccumulationClippingAndSmoothingFollowsCpu) {
  TrainOptions o = ResNet18();
  o.optimizer = "adamw";
  o.lr = 1e-3;
  o.schedule.base_lr = o.lr;
  o.accumulation_steps = 2;
  o.clip_grad_norm = 1.0;
  o.label_smoothing = 0.1;
  o.weight_decay = 0.01;
  const RunResult cpu = Train(o, false, "adamw_cpu");
  const RunResult gpu = Train(o, true, "adamw_gpu");
  // Adam divides by sqrt(v): early steps amplify rounding more than SGD.
  ExpectLossesClose(gpu.losses, cpu.losses, 1e-3);
}

// 16-bit runs take channels-last by default on the GPU (cuDNN's NHWC
// kernels with a [K, R, S, C] weight copy); both layouts follow the CPU.
TEST_F(ResNetCudaTest, MixedPrecisionFollowsCpuLossesAndRepeats) {
  const RunResult cpu = Train(ResNet18(), false, "mixed_cpu_fp32");
  for (const std::string precision : {"bf16", "fp16"}) {
    for (const std::string format : {"auto", "contiguous"}) {
      SCOPED_TRACE(precision + " " + format);
      TrainOptions o = ResNet18();
      o.precision = precision;
      o.memory_format = format;
      o.loss_scale.mode =
          precision == "fp16" ? LossScalerOptions::Mode::kDynamic : LossScalerOptions::Mode::kNone;
      const std::string tag = "mixed_" + precision + "_" + format;
      const RunResult gpu = Train(o, true, tag);
      EXPECT_EQ(gpu.compute_dtype, precision == "fp16" ? DType::kF16 : DType::kBF16);
      EXPECT_EQ(gpu.memory_format, format == "auto" ? "channels_last" : "contiguous");
      EXPECT_EQ(gpu.skipped_steps, 0);
      ExpectLossesClose(gpu.losses, cpu.losses, 3e-2);
      if (format == "auto") {
        const RunResult again = Train(o, true, tag + "_again");
        EXPECT_EQ(again.losses, gpu.losses) << "--deterministic runs differ";
      }
    }
  }
}

// A tensors: dataset of `samples` generated images (read through the
// batch stager on a GPU rank).
std::string WriteImages(const std::string& name, int64_t samples, int64_t first, const TrainOptions& o) {
  SyntheticImagesConfig config;
  config.image_size = o.image_size;
  config.num_classes = o.num_classes;
  config.seed = o.seed;
  SyntheticImages data(config);
  Tensor images = Tensor::Empty({samples, 3, o.image_size, o.image_size}, DType::kF32);
  Tensor labels = Tensor::Empty({samples}, DType::kI64);
  data.FillRange(first, images, labels);
  const std::string path = testing::TempPath(name);
  CHECK(WriteSafetensors(path, {{"images", images}, {"labels", labels}}).ok()) << path;
  return path;
}

// bert-tiny pretraining on the GPU against the CPU: the same weights,
// batches and dropout masks (Philox, keyed by step and global sample), so
// the per-step losses agree within float rounding; AdamW, 4 steps,
// accumulation 2; the GPU run repeats itself bit for bit.
TEST_F(ResNetCudaTest, BertTinyFollowsCpuLossesAndRepeats) {
  TrainOptions o;
  o.model = "bert-tiny";
  o.data = "synthetic";
  o.seq_len = 32;
  o.batch_size = 4;
  o.accumulation_steps = 2;
  o.steps = 4;
  o.optimizer = "adamw";
  o.lr = 1e-3;
  o.schedule.base_lr = o.lr;
  o.dropout = 0.1f;
  o.threads = 2;
  o.deterministic = true;
  o.precision = "fp32";
  const RunResult cpu = Train(o, false, "bert_cpu");
  const RunResult gpu = Train(o, true, "bert_gpu");
  ExpectLossesClose(gpu.losses, cpu.losses, 1e-3);
  const RunResult again = Train(o, true, "bert_gpu_again");
  EXPECT_EQ(again.losses, gpu.losses) << "--deterministic runs differ";
}

TEST_F(ResNetCudaTest, CudaGraphsLossesEqualEagerBitForBit) {
  struct Case {
    std::string name, precision, data;
    int64_t accumulation, growth_interval;
  };
  const std::vector<Case> cases = {
      {"fp32_generated", "fp32", "synthetic", 1, 2000},
      // The scale doubles every 2 steps: each change is a new capture.
      {"fp16_generated_accumulated", "fp16", "synthetic", 2, 2},
      {"bf16_staged", "bf16", "tensors", 2, 2000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TrainOptions o = ResNet18();
    o.steps = 7;
    o.precision = c.precision;
    o.accumulation_steps = c.accumulation;
    o.loss_scale.mode = c.precision == "fp16" ? LossScalerOptions::Mode::kDynamic : LossScalerOptions::Mode::kNone;
    o.loss_scale.growth_interval = c.growth_interval;
    if (c.data == "tensors") {
      o.data = "tensors:" + WriteImages("graphs_train.safetensors", 64, 0, o);
      o.eval_data = "tensors:" + WriteImages("graphs_eval.safetensors", 24, 1000, o);
      o.eval_every = 3;
    }
    // The graphed run first: no earlier run of this shape warmed the
    // algorithm caches for it.
    TrainOptions graphs = o;
    graphs.cuda_graphs = true;
    graphs.save_weights = testing::TempPath("graphs_" + c.name + ".safetensors");
    const RunResult graphed = Train(graphs, true, "graphs_" + c.name);
    o.save_weights = testing::TempPath("graphs_eager_" + c.name + ".safetensors");
    const RunResult eager = Train(o, true, "graphs_eager_" + c.name);
    EXPECT_EQ(graphed.losses, eager.losses) << "replayed steps differ from the eager run";
    EXPECT_EQ(graphed.eval_accuracy, eager.eval_accuracy);
    // Weights, batch norm statistics and counters after the last replay.
    EXPECT_TRUE(FileBytes(graphs.save_weights) == FileBytes(o.save_weights)) << "saved weights differ";
    EXPECT_EQ(graphed.graphed_steps, o.steps - 2);
    EXPECT_EQ(eager.graphed_steps, 0);
    EXPECT_EQ(eager.graph_captures, -1);
    if (c.growth_interval == 2) {
      EXPECT_GE(graphed.graph_captures, 2) << "the loss scale changed; the graph should have been captured again";
    } else {
      EXPECT_EQ(graphed.graph_captures, 1);
    }
  }
}

}  // namespace
}  // namespace ddp
