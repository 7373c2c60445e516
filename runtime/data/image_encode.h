// Writing images: JPEG through libjpeg-turbo and PNG through libpng, for
// generated datasets (tools/make_image_folder) and tests. Encoder errors
// are bugs here, and fatal.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

// `components` 1 (grayscale), 3 (RGB) or 4 (CMYK, stored inverted as
// Adobe's encoder does, with its marker), row-major.
std::string EncodeJpeg(const uint8_t* pixels, int width, int height, int components, int quality);
// RGB, 8 bits per channel.
std::string EncodePng(const uint8_t* rgb, int width, int height);

}  // namespace ddp
