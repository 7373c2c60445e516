// Writes a learnable image-classification set as a `tensors:` dataset:
// images f32 [N, 3, H, W] and labels i64 [N], drawn from the synthetic
// generator (class templates plus noise).
//   make_image_dataset --out train.safetensors --samples 512 --image-size 32 --num-classes 4
#include <cstdio>

#include <gflags/gflags.h>

#include "runtime/data/synthetic_images.h"
#include "runtime/safetensors.h"

DEFINE_string(out, "", "output safetensors file");
DEFINE_int64(samples, 256, "number of samples");
DEFINE_int64(first_sample, 0, "index of the first generated sample (a held-out set uses other indices)");
DEFINE_int64(image_size, 32, "height and width");
DEFINE_int64(num_classes, 10, "classes");
DEFINE_double(noise, 1.0, "noise amplitude");
DEFINE_uint64(seed, 1, "seed of the class templates");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_out.empty() || FLAGS_samples <= 0) {
    std::fprintf(stderr, "make_image_dataset: --out and a positive --samples are required\n");
    return 2;
  }
  ddp::SyntheticImagesConfig config;
  config.image_size = FLAGS_image_size;
  config.num_classes = FLAGS_num_classes;
  config.noise = FLAGS_noise;
  config.seed = FLAGS_seed;
  ddp::SyntheticImages data(config);
  ddp::Tensor images = ddp::Tensor::Empty({FLAGS_samples, 3, FLAGS_image_size, FLAGS_image_size}, ddp::DType::kF32);
  ddp::Tensor labels = ddp::Tensor::Empty({FLAGS_samples}, ddp::DType::kI64);
  data.FillRange(FLAGS_first_sample, images, labels);
  ddp::Status s = ddp::WriteSafetensors(FLAGS_out, {{"images", images}, {"labels", labels}});
  if (!s.ok()) {
    std::fprintf(stderr, "make_image_dataset: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
