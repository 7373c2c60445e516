// Decoding image files into 8-bit RGB: JPEG through libjpeg-turbo's libjpeg
// API, which can decode only a region (jpeg_crop_scanline for the columns,
// jpeg_skip_scanlines for the rows) at a reduced DCT scale (1/2, 1/4, 1/8:
// the scales with SIMD IDCTs), so a training crop costs what its pixels
// cost, not the whole file; PNG through libpng (whole image). Grayscale
// becomes RGB; CMYK and YCCK JPEGs (Adobe's inverted CMYK) are converted.
// The kind is told by the file's first bytes, not its name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace ddp {

enum class ImageFormat { kJpeg, kPng };

struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int width = 0, height = 0;
};

// Format and size from the header alone. An error says what is wrong
// ("not a JPEG or PNG file", libjpeg's or libpng's reason, more pixels
// than kMaxImagePixels).
StatusOr<ImageInfo> ReadImageInfo(const std::string& bytes);
// PIL's decompression-bomb limit (2 x Image.MAX_IMAGE_PIXELS).
inline constexpr int64_t kMaxImagePixels = 178956970;

// A region of the image, in the pixels of the full-size image: columns
// [x, x + width), rows [y, y + height).
struct PixelRegion {
  int x = 0, y = 0, width = 0, height = 0;
};

// Decoded pixels: `width` x `height` RGB, row-major, covering columns
// [x, x + width) and rows [y, y + height) of the image as decoded at
// `scale` (1, 1/2, 1/4 or 1/8 of the full size, whose decoded size is
// scaled_width x scaled_height).
struct DecodedRegion {
  std::vector<uint8_t> rgb;
  int x = 0, y = 0, width = 0, height = 0;
  int scaled_width = 0, scaled_height = 0;
  double scale = 1.0;
};

// Decodes at least `region` (full-size pixels, inside the image, else an
// error) at the smallest DCT scale that keeps the region at least
// `min_width` x `min_height` pixels (JPEG; PNG decodes whole at scale 1).
// `min_width` <= 0 asks for full scale.
StatusOr<DecodedRegion> DecodeImageRegion(const std::string& bytes, const PixelRegion& region, int min_width,
                                          int min_height);

}  // namespace ddp
