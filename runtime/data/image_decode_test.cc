// JPEG and PNG decoding: whole images against what was encoded, regions
// against the whole decode, DCT scales chosen by the size asked for,
// grayscale and CMYK, and every kind of bad file named.
#include "runtime/data/image_decode.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/data/image_encode.h"

namespace ddp {
namespace {

// Smooth colours (JPEG keeps them well): a gradient per channel.
std::vector<uint8_t> Gradient(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / (width - 1));
      p[1] = static_cast<uint8_t>(255 * y / (height - 1));
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(0.05 * (x + y)));
    }
  }
  return rgb;
}

double MeanAbsoluteError(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double total = 0.0;
  for (size_t i = 0; i < a.size(); ++i) total += std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
  return total / static_cast<double>(a.size());
}

TEST(ImageDecodeTest, WholeJpegAndPngDecodeToWhatWasEncoded) {
  const int w = 123, h = 77;
  const std::vector<uint8_t> rgb = Gradient(w, h);
  const std::string jpeg = EncodeJpeg(rgb.data(), w, h, 3, 95);
  StatusOr<ImageInfo> info = ReadImageInfo(jpeg);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->format, ImageFormat::kJpeg);
  EXPECT_EQ(info->width, w);
  EXPECT_EQ(info->height, h);
  StatusOr<DecodedRegion> whole = DecodeImageRegion(jpeg, {0, 0, w, h}, 0, 0);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->width, w);
  EXPECT_EQ(whole->height, h);
  EXPECT_EQ(whole->scale, 1.0);
  EXPECT_LT(MeanAbsoluteError(whole->rgb, rgb), 2.0);

  const std::string png = EncodePng(rgb.data(), w, h);
  info = ReadImageInfo(png);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->format, ImageFormat::kPng);
  StatusOr<DecodedRegion> lossless = DecodeImageRegion(png, {3, 4, 10, 10}, 5, 5);
  ASSERT_TRUE(lossless.ok()) << lossless.status().message();
  EXPECT_EQ(lossless->rgb, rgb);  // whole and exact
}

TEST(ImageDecodeTest, RegionsAreTheWholeDecodesPixelsAndScaleDownByPowersOfTwo) {
  const int w = 400, h = 300;
  const std::vector<uint8_t> rgb = Gradient(w, h);
  const std::string jpeg = EncodeJpeg(rgb.data(), w, h, 3, 90);
  const DecodedRegion whole = DecodeImageRegion(jpeg, {0, 0, w, h}, 0, 0).value();
  const PixelRegion region{101, 57, 150, 120};
  const DecodedRegion part = DecodeImageRegion(jpeg, region, 0, 0).value();
  // At least the region, widened to whole iMCUs on the left.
  EXPECT_LE(part.x, region.x);
  EXPECT_GE(part.x + part.width, region.x + region.width);
  EXPECT_EQ(part.y, region.y);
  EXPECT_EQ(part.height, region.height);
  EXPECT_LT(part.width, w);
  double worst = 0.0;
  for (int y = 0; y < part.height; ++y) {
    for (int x = region.x; x < region.x + region.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int a = part.rgb[(static_cast<size_t>(y) * part.width + (x - part.x)) * 3 + c];
        const int b = whole.rgb[(static_cast<size_t>(y + part.y) * w + x) * 3 + c];
        worst = std::max(worst, static_cast<double>(std::abs(a - b)));
      }
    }
  }
  EXPECT_LE(worst, 1.0);  // the same IDCT; upsampling may round differently at the cut

  // A 200 x 160 crop asked to stay >= 100 x 60: half scale (a quarter would
  // leave 50 x 40).
  const DecodedRegion half = DecodeImageRegion(jpeg, {0, 0, 200, 160}, 100, 60).value();
  EXPECT_EQ(half.scale, 0.5);
  EXPECT_EQ(half.scaled_width, 200);
  EXPECT_EQ(half.scaled_height, 150);
  EXPECT_GE(half.width, 100);
  EXPECT_GE(half.height, 80);
  // Asked to stay >= 20 x 20: an eighth.
  EXPECT_EQ(DecodeImageRegion(jpeg, {0, 0, 400, 300}, 20, 20).value().scale, 0.125);
}

TEST(ImageDecodeTest, GrayscaleAndCmykBecomeRgb) {
  const int w = 32, h = 24;
  std::vector<uint8_t> gray(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<uint8_t>(40 + i % 7);
  const DecodedRegion g = DecodeImageRegion(EncodeJpeg(gray.data(), w, h, 1, 95), {0, 0, w, h}, 0, 0).value();
  ASSERT_EQ(g.rgb.size(), gray.size() * 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    EXPECT_EQ(g.rgb[3 * i], g.rgb[3 * i + 1]);
    EXPECT_EQ(g.rgb[3 * i], g.rgb[3 * i + 2]);
    EXPECT_NEAR(g.rgb[3 * i], gray[i], 4);
  }
  // Pure red in CMYK: no cyan, full magenta and yellow, no black.
  std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < cmyk.size(); i += 4) {
    cmyk[i] = 0;
    cmyk[i + 1] = 255;
    cmyk[i + 2] = 255;
    cmyk[i + 3] = 0;
  }
  const DecodedRegion red = DecodeImageRegion(EncodeJpeg(cmyk.data(), w, h, 4, 95), {0, 0, w, h}, 0, 0).value();
  ASSERT_EQ(red.rgb.size(), static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < red.rgb.size(); i += 3) {
    EXPECT_GE(red.rgb[i], 250);
    EXPECT_LE(red.rgb[i + 1], 5);
    EXPECT_LE(red.rgb[i + 2], 5);
  }
}

TEST(ImageDecodeTest, BadFilesAreNamed) {
  const std::vector<uint8_t> rgb = Gradient(256, 256);
  const std::string jpeg = EncodeJpeg(rgb.data(), 256, 256, 3, 90);
  StatusOr<ImageInfo> info = ReadImageInfo("GIF89a....");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("not a JPEG or PNG file (starts 47 49 46 38)"), std::string::npos)
      << info.status().message();
  EXPECT_NE(ReadImageInfo("").status().message().find("(empty)"), std::string::npos);
  // Cut short: the header reads, the pixels do not.
  const std::string cut = jpeg.substr(0, jpeg.size() / 2);
  ASSERT_TRUE(ReadImageInfo(cut).ok());
  StatusOr<DecodedRegion> torn = DecodeImageRegion(cut, {0, 0, 256, 256}, 0, 0);
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("corrupt JPEG: Premature end of JPEG file"), std::string::npos)
      << torn.status().message();
  // A JPEG whose header is garbage after the marker.
  std::string broken = jpeg.substr(0, 4) + std::string(200, '\x17');
  EXPECT_NE(ReadImageInfo(broken).status().message().find("corrupt JPEG"), std::string::npos);
  const std::string png = EncodePng(rgb.data(), 256, 256);
  StatusOr<DecodedRegion> bad_png = DecodeImageRegion(png.substr(0, png.size() / 2), {0, 0, 256, 256}, 0, 0);
  ASSERT_FALSE(bad_png.ok());
  EXPECT_NE(bad_png.status().message().find("corrupt PNG"), std::string::npos) << bad_png.status().message();
}

}  // namespace
}  // namespace ddp
