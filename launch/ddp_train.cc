// ddp_train: trains a model on this machine's CPU and reports throughput.
//
// This is the foundation's single-rank trainer: it trains the ops-level
// `tiny-cnn` on learnable synthetic images. The model registry (ResNet,
// BERT), data files, checkpoints and multi-rank training arrive with the
// issues that build on it; the flags below already follow DESIGN.md.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "launch/tiny_cnn.h"
#include "runtime/allocator.h"
#include "runtime/execution_context.h"
#include "runtime/data/synthetic_images.h"

DEFINE_string(model, "tiny-cnn", "model to train; this build has: tiny-cnn");
DEFINE_int64(steps, 30, "training steps");
DEFINE_int64(batch_size, 32, "samples per step");
DEFINE_double(lr, 0.05, "SGD learning rate");
DEFINE_double(momentum, 0.9, "SGD momentum");
DEFINE_double(weight_decay, 0.0, "SGD weight decay");
DEFINE_uint64(seed, 1, "seed for initial weights and data");
DEFINE_int32(threads, 0, "CPU threads; 0: all cores");
DEFINE_int64(image_size, 32, "synthetic image height and width");
DEFINE_int64(num_classes, 10, "classes");

namespace ddp {
namespace {

// One clear line naming the flag, then a non-zero exit.
[[noreturn]] void FlagError(const std::string& message) {
  std::fprintf(stderr, "ddp_train: error: %s\n", message.c_str());
  std::exit(2);
}

void ValidateFlags() {
  if (FLAGS_model != "tiny-cnn") FlagError("--model '" + FLAGS_model + "' is unknown; this build has: tiny-cnn");
  if (FLAGS_steps <= 0) FlagError("--steps must be positive, got " + std::to_string(FLAGS_steps));
  if (FLAGS_batch_size <= 1) {
    FlagError("--batch-size must be at least 2 (batch norm needs two samples), got " +
              std::to_string(FLAGS_batch_size));
  }
  if (!(FLAGS_lr > 0.0) || !std::isfinite(FLAGS_lr)) FlagError("--lr must be a positive number");
  if (FLAGS_momentum < 0.0 || FLAGS_momentum >= 1.0) FlagError("--momentum must be in [0, 1)");
  if (FLAGS_threads < 0) FlagError("--threads must be non-negative");
  if (FLAGS_image_size < 4) FlagError("--image-size must be at least 4, got " + std::to_string(FLAGS_image_size));
  if (FLAGS_num_classes < 2) FlagError("--num-classes must be at least 2, got " + std::to_string(FLAGS_num_classes));
}

double PeakResidentMiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

int Main() {
  ValidateFlags();
  ExecutionContext ctx = ExecutionContext::Cpu(FLAGS_threads);
  SyntheticImagesConfig data_config;
  data_config.image_size = FLAGS_image_size;
  data_config.num_classes = FLAGS_num_classes;
  data_config.seed = FLAGS_seed;
  SyntheticImages data(data_config);
  TinyCnnConfig model_config;
  model_config.num_classes = FLAGS_num_classes;
  TinyCnn model(model_config, FLAGS_seed);

  std::printf("ddp_train: model %s (%lld parameters), 1 rank, %d threads, batch %lld, %lldx%lld synthetic images\n",
              FLAGS_model.c_str(), static_cast<long long>(model.num_parameters()), ctx.num_threads(),
              static_cast<long long>(FLAGS_batch_size), static_cast<long long>(FLAGS_image_size),
              static_cast<long long>(FLAGS_image_size));
  Tensor images = Tensor::Empty({FLAGS_batch_size, 3, FLAGS_image_size, FLAGS_image_size}, DType::kF32);
  Tensor labels = Tensor::Empty({FLAGS_batch_size}, DType::kI64);
  const int64_t warmup = std::min<int64_t>(2, FLAGS_steps - 1);
  double timed_seconds = 0.0, first_loss = 0.0, last_loss = 0.0;
  for (int64_t step = 0; step < FLAGS_steps; ++step) {
    data.FillRange(step * FLAGS_batch_size, images, labels);
    const auto start = std::chrono::steady_clock::now();
    const double loss = model.ForwardBackward(ctx, images, labels);
    model.SgdStep(ctx, static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                  static_cast<float>(FLAGS_weight_decay));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "ddp_train: error: loss is %f at step %lld; lower --lr\n", loss,
                   static_cast<long long>(step + 1));
      return 1;
    }
    if (step == 0) first_loss = loss;
    last_loss = loss;
    if (step >= warmup) timed_seconds += seconds;
    std::printf("step %4lld/%lld  loss %.4f  step %.4f s  %.1f images/s\n", static_cast<long long>(step + 1),
                static_cast<long long>(FLAGS_steps), loss, seconds, FLAGS_batch_size / seconds);
  }
  const double samples_per_s = (FLAGS_steps - warmup) * FLAGS_batch_size / timed_seconds;
  std::printf("summary: model %s  steps %lld  first loss %.4f  final loss %.4f  %.1f images/s (after %lld warm-up "
              "steps)  peak tensor memory %.1f MiB  peak resident %.1f MiB\n",
              FLAGS_model.c_str(), static_cast<long long>(FLAGS_steps), first_loss, last_loss, samples_per_s,
              static_cast<long long>(warmup), GetCpuAllocator()->peak_bytes_in_use() / 1048576.0, PeakResidentMiB());
  return 0;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("ddp_train --model tiny-cnn --steps 30 --batch-size 32");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    std::fprintf(stderr, "ddp_train: error: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return ddp::Main();
}
