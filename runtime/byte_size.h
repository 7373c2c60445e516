// Sizes as people write them on a command line: "24GiB", "512MiB", "2G",
// "1.5e9", "24GB". Binary units (KiB, MiB, GiB, TiB, and the short K, M, G,
// T) are powers of 1024; decimal ones (kB, MB, GB, TB) powers of 1000, as
// nvidia-smi and the cards' boxes count.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/status.h"

namespace ddp {

// A positive whole number of bytes (or zero, where `allow_zero`), or an
// error naming `what` (the flag) and the text.
StatusOr<int64_t> ParseByteSize(const std::string& what, const std::string& text, bool allow_zero = false);
// "24.0 GiB", "512.0 MiB", "300 B": the largest binary unit of which there is
// at least one.
std::string FormatBytes(int64_t bytes);

}  // namespace ddp
