// Writes an ImageNet-style folder of generated JPEG (and some PNG,
// grayscale and CMYK) images with learnable classes, for imagefolder:DIR:
// class c is a hue and a stripe direction of its own, under noise, a disc
// and a random brightness, so crops, flips and grayscale keep it apart.
//   make_image_folder --out DIR --classes 4 --per-class 50 --sizes 64x48,48x64 [--corrupt 1]
// --first-index gives a held-out set other images of the same classes.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "runtime/data/image_encode.h"
#include "runtime/durable_files.h"
#include "runtime/random.h"
#include "tools/tool_main.h"

DEFINE_string(out, "", "output directory (created; one folder per class)");
DEFINE_int32(classes, 4, "classes");
DEFINE_int32(per_class, 50, "images per class");
DEFINE_string(sizes, "64x48", "image sizes WxH, comma-separated, used in turn");
DEFINE_int64(first_index, 0, "index of the first image (a held-out set uses others)");
DEFINE_uint64(seed, 1, "seed");
DEFINE_int32(quality, 90, "JPEG quality");
DEFINE_double(png_share, 0.1, "share of images written as PNG");
DEFINE_double(gray_share, 0.1, "share of JPEGs in grayscale");
DEFINE_double(cmyk_share, 0.05, "share of JPEGs in CMYK");
DEFINE_int32(corrupt, 0, "files in the first class that are not images (a decoder must skip them)");

namespace {

double Uniform(uint64_t key, uint64_t k) { return (ddp::SplitMix64(key + k * ddp::kSplitMix64Increment) >> 11) * 0x1p-53; }

void Hsv(double h, double s, double v, double* rgb) {
  const double c = v * s, x = c * (1 - std::fabs(std::fmod(h * 6, 2) - 1)), m = v - c;
  const int sector = static_cast<int>(h * 6) % 6;
  const double table[6][3] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
  for (int i = 0; i < 3; ++i) rgb[i] = table[sector][i] + m;
}

bool Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return static_cast<bool>(out);
}

// Image `index` of class `c` of `classes`, w x h: its encoded bytes and
// their extension.
std::pair<std::string, std::string> DrawImage(int c, int classes, int64_t index, int w, int h) {
  double hue[3];
  Hsv(static_cast<double>(c) / classes, 0.8, 1.0, hue);
  // Angles in [0, 90 degrees): a flip (to 180 - angle) makes no other
  // class's stripes, so grayscale images stay classifiable.
  const double angle = M_PI * c / (2.0 * classes);
  const uint64_t key = ddp::SplitMix64(FLAGS_seed * 1000003 + static_cast<uint64_t>(index));
  const double brightness = 0.6 + 0.4 * Uniform(key, 1);
  const double period = 6.0 + 6.0 * Uniform(key, 2);
  const double cx = w * Uniform(key, 3), cy = h * Uniform(key, 4), radius = std::min(w, h) * (0.1 + 0.2 * Uniform(key, 5));
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double stripe = 0.5 + 0.5 * std::sin(2 * M_PI * (x * std::cos(angle) + y * std::sin(angle)) / period);
      const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < radius * radius;
      for (int k = 0; k < 3; ++k) {
        const double noise = Uniform(key, 16 + (static_cast<uint64_t>(y) * w + x) * 3 + k) - 0.5;
        double v = brightness * (0.35 + 0.65 * stripe) * hue[k] + 0.15 * noise;
        if (disc) v = 0.5 + 0.15 * noise;  // a grey shape that is no class's
        rgb[(static_cast<size_t>(y) * w + x) * 3 + k] = static_cast<uint8_t>(std::lround(255 * std::fmin(1, std::fmax(0, v))));
      }
    }
  }
  const double kind = Uniform(key, 6);
  if (kind < FLAGS_png_share) return {ddp::EncodePng(rgb.data(), w, h), "png"};
  if (kind < FLAGS_png_share + FLAGS_gray_share) {
    std::vector<uint8_t> gray(static_cast<size_t>(w) * h);
    for (size_t p = 0; p < gray.size(); ++p) {
      gray[p] = static_cast<uint8_t>((299 * rgb[3 * p] + 587 * rgb[3 * p + 1] + 114 * rgb[3 * p + 2]) / 1000);
    }
    return {ddp::EncodeJpeg(gray.data(), w, h, 1, FLAGS_quality), "jpg"};
  }
  if (kind < FLAGS_png_share + FLAGS_gray_share + FLAGS_cmyk_share) {
    std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4);
    for (size_t p = 0; p < static_cast<size_t>(w) * h; ++p) {
      const int r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
      const int k = 255 - std::max(r, std::max(g, b));
      const int d = 255 - k;
      cmyk[4 * p] = static_cast<uint8_t>(d == 0 ? 0 : (d - r) * 255 / d);
      cmyk[4 * p + 1] = static_cast<uint8_t>(d == 0 ? 0 : (d - g) * 255 / d);
      cmyk[4 * p + 2] = static_cast<uint8_t>(d == 0 ? 0 : (d - b) * 255 / d);
      cmyk[4 * p + 3] = static_cast<uint8_t>(k);
    }
    return {ddp::EncodeJpeg(cmyk.data(), w, h, 4, FLAGS_quality), "jpg"};
  }
  return {ddp::EncodeJpeg(rgb.data(), w, h, 3, FLAGS_quality), "jpg"};
}

ddp::Status Run() {
  std::vector<std::pair<int, int>> sizes;
  std::stringstream list(FLAGS_sizes);
  for (std::string item; std::getline(list, item, ',');) {
    int w = 0, h = 0;
    if (std::sscanf(item.c_str(), "%dx%d", &w, &h) != 2 || w < 8 || h < 8 || w > 8192 || h > 8192) {
      return ddp::InvalidArgument("--sizes '" + FLAGS_sizes + "': '" + item + "' is not WxH (8x8 to 8192x8192)");
    }
    sizes.emplace_back(w, h);
  }
  if (FLAGS_out.empty() || FLAGS_classes < 2 || FLAGS_per_class < 1 || sizes.empty()) {
    return ddp::InvalidArgument("--out, --classes >= 2, --per-class >= 1 and --sizes are required");
  }
  if (const ddp::Status made = ddp::MakeDirectories(FLAGS_out); !made.ok()) {
    return ddp::Status(made.code(), "--out " + made.message());
  }
  int64_t written = 0;
  for (int c = 0; c < FLAGS_classes; ++c) {
    char name[32];
    std::snprintf(name, sizeof(name), "class_%02d", c);
    const std::string dir = FLAGS_out + "/" + name;
    RETURN_IF_ERROR(ddp::MakeDirectories(dir));
    for (int i = 0; i < FLAGS_per_class; ++i) {
      const int64_t index = FLAGS_first_index + static_cast<int64_t>(c) * FLAGS_per_class + i;
      const auto [w, h] = sizes[index % sizes.size()];
      const auto [bytes, ext] = DrawImage(c, FLAGS_classes, index, w, h);
      char file[64];
      std::snprintf(file, sizeof(file), "/img_%06lld.%s", static_cast<long long>(index), ext.c_str());
      if (!Write(dir + file, bytes)) return ddp::FailedPrecondition("cannot write " + dir + file);
      ++written;
    }
  }
  for (int i = 0; i < FLAGS_corrupt; ++i) {
    char file[64];
    std::snprintf(file, sizeof(file), "/class_00/corrupt_%02d.jpg", i);
    if (!Write(FLAGS_out + file, "\xff\xd8\xff this file was cut short")) {
      return ddp::FailedPrecondition("cannot write " + FLAGS_out + file);
    }
  }
  std::printf("make_image_folder: %lld images in %d classes, %d corrupt, in %s\n", static_cast<long long>(written),
              FLAGS_classes, FLAGS_corrupt, FLAGS_out.c_str());
  return ddp::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("make_image_folder --out DIR --classes 4 --per-class 50 --sizes 64x48,48x64");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("make_image_folder", Run);
}
