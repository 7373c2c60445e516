// Loader-only benchmark: decoded-and-augmented training images per second
// from an imagefolder:DIR, as the training loader makes them (crop-aware
// JPEG decodes, RandomResizedCrop to --image-size, flip, normalize), on
// --threads loader threads. Prints one JSON line. tools/bench/bench_loader.sh
// runs it against torchvision's ImageFolder + DataLoader.
#include <cstdio>
#include <numeric>

#include <gflags/gflags.h>

#include "runtime/clock.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/sampler.h"

DEFINE_string(data, "", "an imagefolder directory");
DEFINE_int64(image_size, 224, "training crop size");
DEFINE_int64(batch_size, 32, "images per batch");
DEFINE_int64(batches, 20, "timed batches (after one untimed)");
DEFINE_int32(threads, 1, "loader threads");
DEFINE_uint64(seed, 1, "seed");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ddp::ImageFolderOptions options;
  options.image_size = FLAGS_image_size;
  options.loader_threads = FLAGS_threads;
  options.seed = FLAGS_seed;
  auto data = ddp::OpenImageFolder("--data", FLAGS_data, options);
  if (!data.ok()) {
    std::fprintf(stderr, "bench_loader: %s\n", data.status().message().c_str());
    return 1;
  }
  ddp::SamplerOptions so;
  so.dataset_size = (*data)->size();
  so.batch_size = FLAGS_batch_size;
  so.seed = FLAGS_seed;
  ddp::GlobalBatchSampler sampler(so);
  ddp::Tensor images = ddp::Tensor::Empty({FLAGS_batch_size, 3, FLAGS_image_size, FLAGS_image_size}, ddp::DType::kF32);
  ddp::Tensor labels = ddp::Tensor::Empty({FLAGS_batch_size}, ddp::DType::kI64);
  double start = 0.0;
  for (int64_t step = 0; step <= FLAGS_batches; ++step) {
    if (step == 1) start = ddp::SteadySeconds();
    const std::vector<int64_t> indices = sampler.MicroBatch(step, 0);
    (*data)->Fill(indices.data(), FLAGS_batch_size, sampler.EpochOf(step), images, labels);
  }
  const double seconds = ddp::SteadySeconds() - start;
  const double per_s = FLAGS_batches * FLAGS_batch_size / seconds;
  std::printf("{\"images_per_s\": %.2f, \"threads\": %d, \"images_per_s_per_thread\": %.2f}\n", per_s, FLAGS_threads,
              per_s / FLAGS_threads);
  return 0;
}
