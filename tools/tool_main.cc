#include "tools/tool_main.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
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

namespace {

// The memory this process may have: the machine's, or its control group's
// limit where that is less (a container's; cgroup v2, then v1).
double ProcessMemoryLimit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  double memory = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page)
                                        : static_cast<double>(std::numeric_limits<int64_t>::max());
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    double limit = 0.0;
    if (in >> limit && limit > 0.0) memory = std::min(memory, limit);  // "max" reads as no number
  }
  return memory;
}

}  // namespace

Status CheckFlagSize(const std::string& flags, int64_t count, int64_t bytes_each) {
  constexpr double kLargest = static_cast<double>(std::numeric_limits<int64_t>::max());
  const double memory = ProcessMemoryLimit();
  const double need = static_cast<double>(count) * static_cast<double>(bytes_each);
  if (count >= 0 && need <= memory) return Status::Ok();
  const std::string needed = need >= kLargest ? "more than " + FormatBytes(std::numeric_limits<int64_t>::max())
                                              : FormatBytes(static_cast<int64_t>(need));
  return InvalidArgument(flags + " need " + needed + ", more than the " +
                         FormatBytes(static_cast<int64_t>(std::min(memory, kLargest))) + " of memory this process may have");
}

}  // namespace ddp
