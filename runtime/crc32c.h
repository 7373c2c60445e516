// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected), and
// the masked form TFRecord files carry (TensorFlow's crc32c::Mask).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddp {

// CRC-32C of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);

}  // namespace ddp
