// One summary record, three renderings: the JSON keys in their contract's
// order, TensorBoard's scalars, and the text lines, each worked by hand.
#include "launch/run_reporter.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

constexpr int64_t kMiB = 1 << 20;

nlohmann::ordered_json SpreadOf(double lo, double median, double hi) {
  return {{"min", lo}, {"median", median}, {"max", hi}, {"slowest_rank", 1}, {"by_rank", {lo, hi}}};
}

RunSummary OneRank() {
  RunSummary s;
  s.model = "resnet18";
  s.device = "cpu";
  s.precision = "fp32";
  s.compute_dtype = "f32";
  s.memory_format = "channels_last";
  s.batch_size = 8;
  s.steps = s.total_steps = 10;
  s.warmup_steps = 2;
  s.samples_per_s = 123.456;
  s.final_loss = 2.5;
  s.noun = "images";
  s.bucket_mb = 25.0;
  s.compute_s = SpreadOf(0.1, 0.1, 0.1);
  s.comm_wait_s = SpreadOf(0.0, 0.0, 0.0);
  s.loader_threads = 1;
  s.memory = {2 * kMiB, 2 * kMiB, 0, 0, 1 * kMiB, 3 * kMiB, 2 * kMiB, 4 * kMiB, 100 * kMiB};
  return s;
}

RunSummary TwoRanksOfBert() {
  RunSummary s = OneRank();
  s.model = "bert-tiny";
  s.precision = "bf16";
  s.compute_dtype = "bf16";
  s.memory_format = "contiguous";
  s.world_size = 2;
  s.accumulation_steps = 4;
  s.zero_stage = 2;
  s.steps = s.total_steps = 20;
  s.samples_per_s = 40.0;
  s.final_loss = 6.12341;
  s.noun = "sequences";
  s.distributed = true;
  s.exposed_comm_s = 0.0126;
  s.traffic_per_step = {72, 3 * kMiB, kMiB + kMiB / 2, 0};  // ZeRO-2 over 4 micro-batches, bf16 gathers
  s.zero_gather_dtype = "bf16";
  s.loss_scaling = true;
  s.loss_scale = 32768.0;
  s.skipped_steps = 3;
  s.compute_s = SpreadOf(0.1, 0.15, 0.2);
  s.input_wait_s = 0.05;
  s.input_wait_share = 0.25;
  s.loader_threads = 2;
  s.reads_files = true;
  s.replaced_samples = 4;
  s.eval_accuracy = 0.125;
  s.eval_label = "masked-token accuracy";
  s.seq_len = 128;
  s.real_tokens_per_s = 4000.0;
  return s;
}

std::vector<std::string> Keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  return keys;
}

TEST(RunReporterTest, OneRankJson) {
  const nlohmann::ordered_json j = SummaryJson(OneRank());
  EXPECT_EQ(Keys(j), (std::vector<std::string>{"model", "device", "precision", "compute_dtype", "memory_format",
                                               "world_size", "batch_size", "accumulation_steps", "zero_stage", "steps",
                                               "samples_per_s", "final_loss", "compute_s", "comm_wait_s",
                                               "input_wait_s", "input_wait_share", "loader_threads",
                                               "replaced_samples", "memory"}));
  EXPECT_EQ(j["memory"].dump(),
            R"({"param_bytes":2097152,"grad_bytes":2097152,"optimizer_bytes":0,"transient_bucket_bytes":0,)"
            R"("activation_peak_bytes":1048576,"peak_bytes":3145728,"allocated_bytes":2097152,"reserved_bytes":4194304,)"
            R"("peak_resident_bytes":104857600,"low_precision_bytes":0,"buffer_bytes":0,"workspace_bytes":0,)"
            R"("gathered_parameter_peak_bytes":0,"split_gradient_peak_bytes":0})");
  EXPECT_EQ(j["samples_per_s"].get<double>(), 123.456);
}

TEST(RunReporterTest, TwoRanksJsonHasEveryOptionalKeyInOrder) {
  RunSummary s = TwoRanksOfBert();
  s.preempted_at_step = 20;
  s.cuda_graph_captures = 1;
  s.gpu_health = {{"pcie", "unavailable"}};
  const nlohmann::ordered_json j = SummaryJson(s);
  EXPECT_EQ(Keys(j),
            (std::vector<std::string>{"model", "device", "precision", "compute_dtype", "memory_format", "world_size",
                                      "batch_size", "accumulation_steps", "zero_stage", "steps", "samples_per_s",
                                      "final_loss", "exposed_comm_s", "bucket_mb", "comm_bytes_per_step",
                                      "cuda_graph_captures",
                                      "zero_gather_dtype", "loss_scale", "skipped_steps", "preempted_at_step",
                                      "compute_s", "comm_wait_s", "gpu_health", "input_wait_s", "input_wait_share",
                                      "loader_threads", "replaced_samples", "eval_accuracy", "seq_len",
                                      "tokens_per_s", "real_tokens_per_s", "memory"}));
  EXPECT_EQ(j["tokens_per_s"].get<double>(), 5120.0);
  EXPECT_EQ(j["eval_accuracy"].get<double>(), 0.125);
  EXPECT_EQ(j["zero_gather_dtype"], "bf16");
  EXPECT_EQ(j["comm_bytes_per_step"], (nlohmann::ordered_json{{"all_reduce", 72},
                                                              {"reduce_scatter", 3 * kMiB},
                                                              {"all_gather", kMiB + kMiB / 2},
                                                              {"broadcast", 0},
                                                              {"total", 72 + 4 * kMiB + kMiB / 2}}));
}

TEST(RunReporterTest, Scalars) {
  const auto one = SummaryScalars(OneRank());
  ASSERT_EQ(one.size(), 15u);  // samples/s and the fourteen memory figures
  EXPECT_EQ(one[0], (std::pair<std::string, double>{"summary/samples_per_s", 123.456}));
  EXPECT_EQ(one[1], (std::pair<std::string, double>{"memory/param_bytes", 2.0 * kMiB}));
  EXPECT_EQ(one[9], (std::pair<std::string, double>{"memory/peak_resident_bytes", 100.0 * kMiB}));
  const auto two = SummaryScalars(TwoRanksOfBert());
  ASSERT_EQ(two.size(), 16u);
  EXPECT_EQ(two[1], (std::pair<std::string, double>{"eval/accuracy", 0.125}));
}

TEST(RunReporterTest, OneRankText) {
  EXPECT_EQ(SummaryText(OneRank()),
            "summary: resnet18  1 rank  steps 10  final loss 2.5000  123.46 images/s (excluding 2 warm-up steps)  "
            "peak tensor memory 3.0 MiB  peak resident 100.0 MiB\n"
            "memory (rank 0): parameters 2.0 MiB  gradients 2.0 MiB  optimizer state 0.0 MiB  transient buckets "
            "0.0 MiB  activations peak 1.0 MiB  allocator peak 3.0 MiB\n");
}

TEST(RunReporterTest, MixedPrecisionTextNamesTheSixteenBitCopy) {
  RunSummary s = OneRank();
  s.memory.low_precision_bytes = 1 * kMiB;
  EXPECT_EQ(SummaryText(s).substr(SummaryText(s).find("memory (rank 0)")),
            "memory (rank 0): parameters 2.0 MiB  gradients 2.0 MiB  optimizer state 0.0 MiB  working copy 1.0 MiB  "
            "transient buckets 0.0 MiB  activations peak 1.0 MiB  allocator peak 3.0 MiB\n");
}

TEST(RunReporterTest, TwoRanksTextWithTheSkippedStepsWarning) {
  EXPECT_EQ(SummaryText(TwoRanksOfBert()),
            "summary: bert-tiny  2 ranks  steps 20  final loss 6.1234  40.00 sequences/s (excluding 2 warm-up steps)"
            "  5120 tokens/s (4000 without padding)  exposed comm 0.013 s/step"
            "  sent 4.5 MiB/step (all-reduce 72 B, reduce-scatter 3.0 MiB, all-gather 1.5 MiB)"
            "  compute 0.100/0.150/0.200 s/step (min/median/max over ranks)  eval masked-token accuracy 0.1250"
            "  loss scale 32768  skipped steps 3  input wait 25.0% (2 loader threads)"
            "  4 samples replaced (undecodable)  peak tensor memory 3.0 MiB  peak resident 100.0 MiB\n"
            "memory (rank 0): parameters 2.0 MiB  gradients 2.0 MiB  optimizer state 0.0 MiB  transient buckets "
            "0.0 MiB  activations peak 1.0 MiB  allocator peak 3.0 MiB\n"
            "warning: 3 of 20 steps (15.0%) were skipped for non-finite gradients, more than --max-skipped-share "
            "0.05; the loss scale ended at 32768 (try a lower --lr, or --precision bf16)\n");
}

StepRecord FullStep() {
  StepRecord r;
  r.step = 12;
  r.total_steps = 100;
  r.loss = 2.34567;
  r.lr = 0.1;
  r.seconds = 0.5;
  r.samples_per_step = 16;
  r.noun = "sequences";
  r.seq_len = 128;
  r.tokens = 1000;
  r.loss_scaling = true;
  r.loss_scale = 1024.0;
  r.skipped = true;
  r.input_wait_s = 0.01;
  r.replaced_samples = 2;
  r.checkpoint_committed = 10;
  r.checkpoint_stall_s = 0.02;
  r.distributed = true;
  r.exposed_comm_s = 0.0375;
  r.buckets = {{0.01, 0.02, 0.0}, {0.03, 0.05, 0.001}};
  r.eval_accuracy = 0.5;
  r.eval_label = "MLM accuracy";
  r.eta_s = 45.0;
  return r;
}

TEST(RunReporterTest, StepJsonKeysInOrder) {
  const nlohmann::ordered_json j = StepJson(FullStep());
  EXPECT_EQ(Keys(j), (std::vector<std::string>{"step", "loss", "lr", "step_time_s", "samples_per_s", "tokens_per_s",
                                               "real_tokens_per_s", "loss_scale", "skipped", "input_wait_s",
                                               "replaced_samples", "checkpoint_committed", "checkpoint_stall_s",
                                               "exposed_comm_s", "buckets", "eval_accuracy"}));
  EXPECT_EQ(j["samples_per_s"].get<double>(), 32.0);
  EXPECT_EQ(j["tokens_per_s"].get<double>(), 4096.0);
  EXPECT_EQ(j["real_tokens_per_s"].get<double>(), 2000.0);
  EXPECT_EQ(j["buckets"].dump(), R"([{"launched_s":0.01,"finished_s":0.02,"waited_s":0.0},)"
                                 R"({"launched_s":0.03,"finished_s":0.05,"waited_s":0.001}])");
  // A replayed graph has no bucket timings; one rank none at all.
  StepRecord graphed = FullStep();
  graphed.graphed = true;
  EXPECT_FALSE(StepJson(graphed).contains("buckets"));
  EXPECT_TRUE(StepJson(graphed)["cuda_graph"].get<bool>());
  StepRecord alone;
  alone.step = 1;
  alone.seconds = 1.0;
  alone.samples_per_step = 8;
  EXPECT_EQ(Keys(StepJson(alone)),
            (std::vector<std::string>{"step", "loss", "lr", "step_time_s", "samples_per_s", "input_wait_s"}));
}

TEST(RunReporterTest, RecordScalarsSkipTheStepAndWhatIsNoNumber) {
  const auto scalars = RecordScalars(StepJson(FullStep()));
  std::vector<std::string> names;
  for (const auto& [name, value] : scalars) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"train/loss", "train/lr", "train/step_time_s", "train/samples_per_s",
                                             "train/tokens_per_s", "train/real_tokens_per_s", "train/loss_scale",
                                             "train/input_wait_s", "train/replaced_samples",
                                             "train/checkpoint_committed", "train/checkpoint_stall_s",
                                             "train/exposed_comm_s", "eval/accuracy"}));
  EXPECT_EQ(scalars.back().second, 0.5);
}

TEST(RunReporterTest, StartLine) {
  EXPECT_EQ(StartLine({"resnet50", "cpu", "sgd", "224x224 images from synthetic", 25557032, 8, 2, 100, 4, 1, 0.125}),
            "ddp_train: resnet50, 25557032 parameters, 4 ranks x 1 threads on cpu, batch 8 x 2 micro-batches per rank, "
            "100 steps, sgd lr 0.125, 224x224 images from synthetic");
  EXPECT_NE(StartLine({"bert-tiny", "cuda:0", "adamw", "d", 1, 1, 1, 1, 1, 8, 1e-4}).find("1 rank x 8 threads"),
            std::string::npos);
}

TEST(RunReporterTest, StepLine) {
  EXPECT_EQ(StepLine(FullStep()),
            "step    12/100  loss 2.3457  lr 0.10000  0.500 s  32.0 sequences/s  4096 tokens/s  exposed comm 0.037 s"
            "  loss scale 1024  skipped: non-finite gradients  eval MLM accuracy 0.5000  ETA 45s");
}

TEST(RunReporterTest, MeterTimesAllButTheWarmupAndWarnsOnceAboutInput) {
  RunMeter meter(2);
  // Two untimed steps, then five of 0.5 s with 0.05 s of input wait (10%).
  meter.AddStep(0, 9.0, 1.0, 100, 5.0, 8.0, 1.0, 1, true);
  meter.AddStep(1, 9.0, 1.0, 100, 5.0, 8.0, 1.0, 0, false);
  for (int64_t i = 2; i < 7; ++i) {
    meter.AddStep(i, 0.5, 0.01, 1000, 0.05, i == 2 ? -1.0 : 0.4, 0.02, 2, i == 6);
    if (i < 6) EXPECT_FALSE(meter.InputWaitWarning(false, 1, 2).has_value()) << "after " << i - 1 << " timed steps";
  }
  meter.AddStall(1, 100.0);  // untimed: not counted
  meter.AddStall(6, 0.5);    // a checkpoint after a timed step: counted
  const std::optional<std::string> warning = meter.InputWaitWarning(false, 1, 2);
  ASSERT_TRUE(warning.has_value());
  EXPECT_EQ(*warning,
            "ddp_train: warning: waiting for input took 8.3% of step time over 5 steps (above 5%): the data loader is "
            "the bottleneck; raise --loader-threads (now 1) or --prefetch (now 2)");
  EXPECT_FALSE(meter.InputWaitWarning(true, 1, 2).has_value());  // once
  EXPECT_EQ(meter.compute_times().size(), 4u);  // the unknown one left out
  EXPECT_EQ(meter.wait_times().size(), 5u);
  RunSummary s;
  meter.Fill(7, 8, /*exposed=*/true, &s);
  EXPECT_DOUBLE_EQ(s.samples_per_s, 5 * 8 / 3.0);  // 5 timed steps in 2.5 s + 0.5 s of stall
  EXPECT_DOUBLE_EQ(*s.exposed_comm_s, 0.01);
  EXPECT_DOUBLE_EQ(s.input_wait_s, 0.05);
  EXPECT_DOUBLE_EQ(s.input_wait_share, 0.25 / 3.0);
  EXPECT_DOUBLE_EQ(s.real_tokens_per_s, 5000 / 3.0);
  EXPECT_EQ(s.replaced_samples, 11);
  EXPECT_EQ(s.skipped_steps, 2);
  RunSummary no_exposed;
  meter.Fill(7, 8, /*exposed=*/false, &no_exposed);
  EXPECT_FALSE(no_exposed.exposed_comm_s.has_value());
}

}  // namespace
}  // namespace ddp
