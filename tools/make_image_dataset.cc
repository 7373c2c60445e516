// Writes a learnable image-classification set as a `tensors:` dataset:
// images f32 [N, 3, H, W] and labels i64 [N], drawn from the synthetic
// generator (class templates plus noise).
//   make_image_dataset --out train.safetensors --samples 512 --image-size 32 --num-classes 4
#include <cstdio>
#include <limits>

#include <gflags/gflags.h>

#include "runtime/data/synthetic_images.h"
#include "runtime/path_use.h"
#include "runtime/safetensors.h"
#include "tools/tool_main.h"

DEFINE_string(out, "", "output safetensors file");
DEFINE_int64(samples, 256, "number of samples");
DEFINE_int64(first_sample, 0, "index of the first generated sample (a held-out set uses other indices)");
DEFINE_int64(image_size, 32, "height and width");
DEFINE_int64(num_classes, 10, "classes");
DEFINE_double(noise, 1.0, "noise amplitude");
DEFINE_uint64(seed, 1, "seed of the class templates");

namespace ddp {
namespace {

Status Run() {
  if (FLAGS_out.empty() || FLAGS_samples <= 0) return InvalidArgument("--out and a positive --samples are required");
  if (FLAGS_image_size < 1 || FLAGS_image_size > 4096) {
    return InvalidArgument("--image-size must be in [1, 4096], got " + std::to_string(FLAGS_image_size));
  }
  if (FLAGS_num_classes < 2) return InvalidArgument("--num-classes must be at least 2");
  if (FLAGS_first_sample < 0 || FLAGS_first_sample > std::numeric_limits<int64_t>::max() - FLAGS_samples) {
    return InvalidArgument("--first-sample " + std::to_string(FLAGS_first_sample) + " must be non-negative, with " +
                           "--first-sample + --samples within 2^63");
  }
  RETURN_IF_ERROR(CheckOutputPaths({}, {{"--out", FLAGS_out}}));
  // The images, held twice while the file is written.
  RETURN_IF_ERROR(CheckFlagSize("--samples " + std::to_string(FLAGS_samples) + " of --image-size " +
                                    std::to_string(FLAGS_image_size),
                                FLAGS_samples, 2 * (3 * FLAGS_image_size * FLAGS_image_size * 4 + 8)));
  SyntheticImagesConfig config;
  config.image_size = FLAGS_image_size;
  config.num_classes = FLAGS_num_classes;
  config.noise = FLAGS_noise;
  config.seed = FLAGS_seed;
  SyntheticImages data(config);
  Tensor images = Tensor::Empty({FLAGS_samples, 3, FLAGS_image_size, FLAGS_image_size}, DType::kF32);
  Tensor labels = Tensor::Empty({FLAGS_samples}, DType::kI64);
  data.FillRange(FLAGS_first_sample, images, labels);
  return WriteSafetensors(FLAGS_out, {{"images", images}, {"labels", labels}});
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("make_image_dataset --out FILE.safetensors --samples N --image-size S --num-classes C");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("make_image_dataset", ddp::Run);
}
