#include "tools/tool_main.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>

#include "runtime/byte_size.h"

namespace ddp {

int RunTool(const char* name, const std::function<Status()>& body) {
  Status status;
  try {
    status = body();
  } catch (const std::bad_alloc&) {
    status = FailedPrecondition("out of memory: the input, or the sizes asked for, need more than this machine has");
  } catch (const std::length_error&) {
    status = FailedPrecondition("a size past what memory can hold: the input, or the sizes asked for, are too large");
  }
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", name, status.message().c_str());
  return 1;
}

Status CheckFlagSize(const std::string& flags, int64_t count, int64_t bytes_each) {
  constexpr double kLargest = static_cast<double>(std::numeric_limits<int64_t>::max());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double memory = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : kLargest;
  const double need = static_cast<double>(count) * static_cast<double>(bytes_each);
  if (count >= 0 && need <= memory) return Status::Ok();
  const std::string needed = need >= kLargest ? "more than " + FormatBytes(std::numeric_limits<int64_t>::max())
                                              : FormatBytes(static_cast<int64_t>(need));
  return InvalidArgument(flags + " need " + needed + ", more than this machine's " +
                         FormatBytes(static_cast<int64_t>(std::min(memory, kLargest))) + " of memory");
}

}  // namespace ddp
