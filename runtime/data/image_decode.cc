#include "runtime/data/image_decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

namespace ddp {
namespace {

bool IsJpeg(const std::string& b) {
  return b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8 &&
         static_cast<uint8_t>(b[2]) == 0xFF;
}

bool IsPng(const std::string& b) { return b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0; }

Status NotAnImage(const std::string& b) {
  char first[32] = "empty";
  if (b.size() >= 4) {
    std::snprintf(first, sizeof(first), "starts %02x %02x %02x %02x", static_cast<uint8_t>(b[0]),
                  static_cast<uint8_t>(b[1]), static_cast<uint8_t>(b[2]), static_cast<uint8_t>(b[3]));
  } else if (!b.empty()) {
    std::snprintf(first, sizeof(first), "%zu bytes", b.size());
  }
  return InvalidArgument(std::string("not a JPEG or PNG file (") + first + ")");
}

// libjpeg reports errors through error_exit, which must not return: it
// jumps back to the setjmp in the decoding function, which owns every C++
// object involved (the frames jumped over are libjpeg's C frames).
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JumpOnError(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings are let pass (PIL passes them too: "extraneous bytes before
// marker"), but a file that ends early is corrupt: libjpeg would fill the
// rest with grey.
void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) JumpOnError(cinfo);
}

// Adobe's CMYK JPEGs store the inks inverted (255 = none): then
// R = C' K' / 255; plain CMYK is inverted first.
void CmykToRgb(const uint8_t* cmyk, int n, bool inverted, uint8_t* rgb) {
  for (int i = 0; i < n; ++i) {
    int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    rgb[3 * i] = static_cast<uint8_t>((c * k + 127) / 255);
    rgb[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
    rgb[3 * i + 2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

// The header (out == nullptr), or the region at the scale chosen.
Status DecodeJpeg(const std::string& bytes, const PixelRegion& region, int min_width, int min_height,
                  ImageInfo* info, DecodedRegion* out) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = JumpOnError;
  errors.mgr.emit_message = OnJpegMessage;
  std::vector<uint8_t> cmyk;  // before the jump point: never re-constructed by it
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return InvalidArgument(std::string("corrupt JPEG: ") + errors.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&cinfo, TRUE);
  info->format = ImageFormat::kJpeg;
  info->width = static_cast<int>(cinfo.image_width);
  info->height = static_cast<int>(cinfo.image_height);
  if (out == nullptr) {
    jpeg_destroy_decompress(&cinfo);
    return Status::Ok();
  }
  const bool is_cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;  // PIL's
  int denom = 1;
  while (min_width > 0 && denom < 8 && region.width >= 2 * denom * min_width &&
         region.height >= 2 * denom * min_height) {
    denom *= 2;
  }
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned>(denom);
  jpeg_start_decompress(&cinfo);
  out->scaled_width = static_cast<int>(cinfo.output_width);
  out->scaled_height = static_cast<int>(cinfo.output_height);
  out->scale = 1.0 / denom;
  const int x0 = region.x / denom, y0 = region.y / denom;
  const int x1 = std::min(out->scaled_width, (region.x + region.width + denom - 1) / denom);
  const int y1 = std::min(out->scaled_height, (region.y + region.height + denom - 1) / denom);
  JDIMENSION x = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(std::max(1, x1 - x0));
  // Only the region's columns (widened to whole iMCUs) are decoded.
  if (static_cast<int>(width) < out->scaled_width) jpeg_crop_scanline(&cinfo, &x, &width);
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  const int rows = std::max(1, y1 - y0);
  const int components = static_cast<int>(cinfo.output_components);
  std::vector<uint8_t>& pixels = is_cmyk ? cmyk : out->rgb;
  pixels.resize(static_cast<size_t>(width) * rows * components);
  for (int r = 0; r < rows;) {
    JSAMPROW row = pixels.data() + static_cast<size_t>(r) * width * components;
    const JDIMENSION read = jpeg_read_scanlines(&cinfo, &row, 1);
    if (read == 0) {  // past the last row: the region was outside the image
      jpeg_destroy_decompress(&cinfo);
      return InvalidArgument("corrupt JPEG: no row " + std::to_string(y0 + r) + " of " +
                             std::to_string(out->scaled_height));
    }
    r += static_cast<int>(read);
  }
  const bool inverted = cinfo.saw_Adobe_marker;
  jpeg_abort_decompress(&cinfo);  // the rows below the region stay undecoded
  jpeg_destroy_decompress(&cinfo);
  if (is_cmyk) {
    out->rgb.resize(static_cast<size_t>(width) * rows * 3);
    CmykToRgb(cmyk.data(), static_cast<int>(width) * rows, inverted, out->rgb.data());
  }
  out->x = static_cast<int>(x);
  out->y = y0;
  out->width = static_cast<int>(width);
  out->height = rows;
  return Status::Ok();
}

Status DecodePng(const std::string& bytes, ImageInfo* info, DecodedRegion* out) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return InvalidArgument(std::string("corrupt PNG: ") + image.message);
  }
  info->format = ImageFormat::kPng;
  info->width = static_cast<int>(image.width);
  info->height = static_cast<int>(image.height);
  if (out == nullptr) {
    png_image_free(&image);
    return Status::Ok();
  }
  // RGBA, then the alpha dropped: what PIL's convert("RGB") does.
  image.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, rgba.data(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    return InvalidArgument("corrupt PNG: " + why);
  }
  const size_t n = static_cast<size_t>(image.width) * image.height;
  out->rgb.resize(3 * n);
  for (size_t i = 0; i < n; ++i) std::memcpy(&out->rgb[3 * i], &rgba[4 * i], 3);
  out->x = out->y = 0;
  out->width = out->scaled_width = info->width;
  out->height = out->scaled_height = info->height;
  out->scale = 1.0;
  return Status::Ok();
}

}  // namespace

StatusOr<ImageInfo> ReadImageInfo(const std::string& bytes) {
  ImageInfo info;
  if (IsJpeg(bytes)) {
    RETURN_IF_ERROR(DecodeJpeg(bytes, PixelRegion(), 0, 0, &info, nullptr));
  } else if (IsPng(bytes)) {
    RETURN_IF_ERROR(DecodePng(bytes, &info, nullptr));
  } else {
    return NotAnImage(bytes);
  }
  if (info.width <= 0 || info.height <= 0) return InvalidArgument("the image has no pixels");
  if (static_cast<int64_t>(info.width) * info.height > kMaxImagePixels) {
    return InvalidArgument(std::to_string(info.width) + "x" + std::to_string(info.height) + " pixels, more than " +
                           std::to_string(kMaxImagePixels) + " (PIL's limit; a decompression bomb?)");
  }
  return info;
}

StatusOr<DecodedRegion> DecodeImageRegion(const std::string& bytes, const PixelRegion& region, int min_width,
                                          int min_height) {
  ASSIGN_OR_RETURN(const ImageInfo header, ReadImageInfo(bytes));
  if (region.x < 0 || region.y < 0 || region.width <= 0 || region.height <= 0 ||
      region.x + region.width > header.width || region.y + region.height > header.height) {
    return InvalidArgument("region " + std::to_string(region.width) + "x" + std::to_string(region.height) + " at (" +
                           std::to_string(region.x) + ", " + std::to_string(region.y) + ") is outside the " +
                           std::to_string(header.width) + "x" + std::to_string(header.height) + " image");
  }
  ImageInfo info;
  DecodedRegion out;
  if (IsJpeg(bytes)) {
    RETURN_IF_ERROR(DecodeJpeg(bytes, region, min_width, min_height, &info, &out));
  } else if (IsPng(bytes)) {
    RETURN_IF_ERROR(DecodePng(bytes, &info, &out));
  } else {
    return NotAnImage(bytes);
  }
  return out;
}

}  // namespace ddp
