#include "launch/progress.h"

#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ddp {

bool ProgressPrinter::Due(int64_t step, int64_t total, bool keep, double now) const {
  if (keep || step == 1 || step == total || terminal_) return true;
  if (log_every_ > 0) return step % log_every_ == 0;
  return now - last_ >= kLogSeconds;
}

void ProgressPrinter::Print(const std::string& line, bool keep, double now) {
  last_ = now;
  if (terminal_) {
    std::printf("\r\033[2K%s", line.c_str());  // back to the start, the line cleared
    pending_ = !keep;
    if (keep) std::printf("\n");
  } else {
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

void ProgressPrinter::EndLine() {
  if (!pending_) return;
  std::printf("\n");
  std::fflush(stdout);
  pending_ = false;
}

std::string FormatDuration(double seconds) {
  const int64_t s = std::max<int64_t>(0, static_cast<int64_t>(std::llround(seconds)));
  char text[32];
  if (s < 60) {
    std::snprintf(text, sizeof(text), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lldh%02lldm%02llds", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  }
  return text;
}

bool StdoutIsATerminal() {
  for (const char* launched : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_STEP_ID"}) {
    if (std::getenv(launched) != nullptr) return false;
  }
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace ddp
