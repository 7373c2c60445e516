// The training and evaluation transforms against torchvision on PIL
// (tests/golden/image_transforms.json, from tests/golden/make_transform_golden.py),
// torchvision's crop-box arithmetic worked by hand from scripted draws, and
// the properties of seeded draws.
#include "runtime/data/image_transforms.h"

#include <array>
#include <cmath>
#include <fstream>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/data/image_encode.h"

namespace ddp {
namespace {

// Draws given in advance, as torchvision's generator would have made them.
struct ScriptedRng {
  std::vector<double> uniforms;
  size_t next = 0;
  double Uniform() { return uniforms.at(next++); }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Uniform() * static_cast<double>(n)); }
};

TEST(RandomResizedCropTest, FollowsTorchvisionsArithmetic) {
  // 500 x 375, scale draw 0.5: target area 187500 * (0.08 + 0.5 * 0.92) =
  // 101250; ratio draw 0.5: log-ratio 0, aspect 1; w = h = round(318.198) =
  // 318; row randint(0, 58) from 0.25: 14; column randint(0, 183) from
  // 0.75: 137.
  ScriptedRng rng{{0.5, 0.5, 0.25, 0.75}};
  CropBox box = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, rng);
  EXPECT_EQ(box.width, 318);
  EXPECT_EQ(box.height, 318);
  EXPECT_EQ(box.y, 14);
  EXPECT_EQ(box.x, 137);
  EXPECT_EQ(rng.next, 4u);

  // A first try too tall to fit (scale 1, aspect 3/4: w 375, h 500 > 375)
  // is drawn again: the second try (scale draw 0, ratio draw 1: area 15000,
  // aspect 4/3) gives w = round(141.42) = 141, h = round(106.07) = 106.
  ScriptedRng retry{{1.0, 0.0, 0.0, 1.0, 0.0, 0.0}};
  box = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, retry);
  EXPECT_EQ(box.width, 141);
  EXPECT_EQ(box.height, 106);
  EXPECT_EQ(box.x, 0);
  EXPECT_EQ(box.y, 0);
  EXPECT_EQ(retry.next, 6u);

  // Ten misses (a strip 1000 x 10, every try asking for more height than
  // there is): the central crop at the widest allowed ratio, w =
  // round(10 * 4/3) = 13, at column (1000 - 13) / 2 = 493.
  ScriptedRng misses{std::vector<double>(20, 1.0)};
  box = RandomResizedCropBox(1000, 10, 0.5, 1.0, 3.0 / 4.0, 4.0 / 3.0, misses);
  EXPECT_EQ(box.width, 13);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.x, 493);
  EXPECT_EQ(box.y, 0);
  EXPECT_EQ(misses.next, 20u);
}

TEST(RandomResizedCropTest, SeededDrawsAreInRangeAndKeyedBySeedEpochAndIndex) {
  std::set<std::vector<int>> seen;
  for (int64_t index = 0; index < 200; ++index) {
    SampleRng rng(7, kAugmentStream, 3, index);
    const CropBox box = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, rng);
    ASSERT_GT(box.width, 0);
    ASSERT_GT(box.height, 0);
    ASSERT_LE(box.x + box.width, 500);
    ASSERT_LE(box.y + box.height, 375);
    const double area = static_cast<double>(box.width) * box.height / (500.0 * 375.0);
    const double ratio = static_cast<double>(box.width) / box.height;
    EXPECT_GT(area, 0.08 * 0.97) << index;
    EXPECT_LT(ratio, 4.0 / 3.0 * 1.03) << index;
    EXPECT_GT(ratio, 3.0 / 4.0 / 1.03) << index;
    seen.insert({box.x, box.y, box.width, box.height});
    // The same key gives the same box; another epoch or seed, another.
    SampleRng again(7, kAugmentStream, 3, index), epoch(7, kAugmentStream, 4, index),
        seed(8, kAugmentStream, 3, index);
    const CropBox same = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, again);
    EXPECT_EQ(same.x, box.x);
    EXPECT_EQ(same.width, box.width);
    const CropBox e = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, epoch);
    const CropBox s = RandomResizedCropBox(500, 375, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0, seed);
    EXPECT_FALSE(e.x == box.x && e.y == box.y && e.width == box.width) << index;
    EXPECT_FALSE(s.x == box.x && s.y == box.y && s.width == box.width) << index;
  }
  EXPECT_GT(seen.size(), 195u);
}

TEST(TrainPlanTest, FlipsAboutHalfTheSamplesAndOnlyWhenAsked) {
  AugmentOptions options;
  int flipped = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    SampleRng rng(1, kAugmentStream, 0, i);
    flipped += TrainPlan(64, 48, 32, options, rng).flip ? 1 : 0;
  }
  EXPECT_GT(flipped, 440);
  EXPECT_LT(flipped, 560);
  options.hflip = false;
  for (int64_t i = 0; i < 100; ++i) {
    SampleRng rng(1, kAugmentStream, 0, i);
    EXPECT_FALSE(TrainPlan(64, 48, 32, options, rng).flip);
  }
}

// The golden image, as decoded pixels at full scale.
DecodedRegion GoldenImage(int width, int height) {
  DecodedRegion d;
  d.width = d.scaled_width = width;
  d.height = d.scaled_height = height;
  d.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        d.rgb[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>((7 * x + 13 * y + 50 * c + (x * y) % 17) % 256);
      }
    }
  }
  return d;
}

// The normalized planes back in 8-bit units, against PIL's HWC pixels:
// within PIL's rounding to 8 bits between and after its two passes.
double WorstDifference(const std::vector<float>& chw, const std::vector<int>& hwc, int size, bool flipped) {
  double worst = 0.0;
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int from = flipped ? size - 1 - x : x;
        const double ours = (chw[(static_cast<size_t>(c) * size + y) * size + from] * kImageNetStd[c] +
                             kImageNetMean[c]) * 255.0;
        worst = std::max(worst, std::fabs(ours - hwc[(static_cast<size_t>(y) * size + x) * 3 + c]));
      }
    }
  }
  return worst;
}

nlohmann::json Golden() {
  std::ifstream in("tests/golden/image_transforms.json");
  EXPECT_TRUE(in) << "tests/golden/image_transforms.json missing";
  return nlohmann::json::parse(in);
}

TEST(ResampleTest, CropsMatchTorchvisionOnPil) {
  const nlohmann::json golden = Golden();
  const int width = golden["width"], height = golden["height"];
  const DecodedRegion image = GoldenImage(width, height);
  for (const auto& c : golden["crops"]) {
    const int size = c["size"];
    const std::vector<int> box = c["box"];
    ImagePlan plan;
    plan.x = {box[0], box[2], size, 0, size};
    plan.y = {box[1], box[3], size, 0, size};
    for (bool flip : {false, true}) {
      plan.flip = flip;
      std::vector<float> chw(3 * size * size);
      ResampleNormalized(image, plan, width, height, chw.data());
      const double worst = WorstDifference(chw, c["pixels"].get<std::vector<int>>(), size, flip);
      EXPECT_LE(worst, 1.0) << "box " << c["box"].dump() << " flip " << flip;
    }
  }
}

TEST(ResampleTest, EvaluationTransformMatchesResizeAndCenterCrop) {
  const nlohmann::json golden = Golden();
  const int width = golden["width"], height = golden["height"];
  const DecodedRegion image = GoldenImage(width, height);
  for (const auto& e : golden["eval"]) {
    const int size = e["size"];
    const ImagePlan plan = EvalPlan(width, height, size);
    // Only the rows and columns the kept pixels read are decoded.
    EXPECT_GE(plan.decode.x, 0);
    EXPECT_LE(plan.decode.x + plan.decode.width, width);
    EXPECT_LT(plan.decode.width, width);
    std::vector<float> chw(3 * size * size);
    ResampleNormalized(image, plan, width, height, chw.data());
    EXPECT_LE(WorstDifference(chw, e["pixels"].get<std::vector<int>>(), size, false), 1.0) << "size " << size;
  }
}

TEST(ResampleTest, ConstantImagesNormalizeExactlyAndARampDownscalesByPilsWeights) {
  DecodedRegion flat;
  flat.width = flat.scaled_width = 10;
  flat.height = flat.scaled_height = 6;
  flat.rgb.assign(10 * 6 * 3, 0);
  for (size_t i = 0; i < flat.rgb.size(); ++i) flat.rgb[i] = static_cast<uint8_t>(i % 3 == 0 ? 200 : i % 3 == 1 ? 100 : 0);
  ImagePlan plan;
  plan.x = {0, 10, 5, 0, 5};
  plan.y = {0, 6, 3, 0, 3};
  std::vector<float> chw(3 * 5 * 3);
  ResampleNormalized(flat, plan, 10, 6, chw.data());
  const float want[3] = {(200.0f / 255.0f - kImageNetMean[0]) / kImageNetStd[0],
                         (100.0f / 255.0f - kImageNetMean[1]) / kImageNetStd[1],
                         (0.0f - kImageNetMean[2]) / kImageNetStd[2]};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 15; ++i) EXPECT_NEAR(chw[c * 15 + i], want[c], 1e-5) << c << " " << i;
  }
  // A horizontal ramp 10 x in every channel, halved: the first output's
  // center is 1.0, support 2, pixel centers 0.5, 1.5, 2.5 weigh 0.75, 0.75,
  // 0.25 (PIL's triangle over distance / 2), so it is
  // (0 + 7.5 + 5) / 1.75 = 7.142857.
  DecodedRegion ramp = flat;
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 10; ++x) {
      for (int c = 0; c < 3; ++c) ramp.rgb[(y * 10 + x) * 3 + c] = static_cast<uint8_t>(10 * x);
    }
  }
  ResampleNormalized(ramp, plan, 10, 6, chw.data());
  EXPECT_NEAR((chw[0] * kImageNetStd[0] + kImageNetMean[0]) * 255.0, 12.5 / 1.75, 1e-3);
}

// A crop decoded at a reduced DCT scale, of an image whose size the scale
// does not divide, ending short of its edges: the resampler must read only
// what the decoder decoded (it once mapped the crop's end one pixel past).
TEST(ResampleTest, CropsDecodedAtAReducedScaleStayInsideTheDecodedRegion) {
  for (const auto& [w, h, x, y, cw, ch] : std::vector<std::array<int, 6>>{
           {1001, 901, 0, 0, 1000, 900}, {1003, 997, 3, 1, 999, 995}, {777, 555, 1, 2, 770, 550}}) {
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7 % 251);
    const std::string jpeg = EncodeJpeg(rgb.data(), w, h, 3, 80);
    ImagePlan plan;
    plan.x = {x, cw, 224, 0, 224};
    plan.y = {y, ch, 224, 0, 224};
    const DecodedRegion decoded = DecodeImageRegion(jpeg, {x, y, cw, ch}, 224, 224).value();
    EXPECT_LT(decoded.scale, 1.0) << w << "x" << h;
    std::vector<float> chw(3 * 224 * 224);
    ResampleNormalized(decoded, plan, w, h, chw.data());  // CHECKs that it stays inside
  }
  // A region outside the image is refused, not decoded.
  std::vector<uint8_t> rgb(64 * 64 * 3, 100);
  const std::string jpeg = EncodeJpeg(rgb.data(), 64, 64, 3, 90);
  EXPECT_EQ(DecodeImageRegion(jpeg, {60, 0, 10, 10}, 0, 0).status().message(),
            "region 10x10 at (60, 0) is outside the 64x64 image");
}

}  // namespace
}  // namespace ddp
