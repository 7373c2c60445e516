// Rank 0's progress lines: step, loss, throughput and the time left. On a
// terminal one line is redrawn each step; in a log (not a terminal) a line
// is printed every --log-every steps, or with --log-every 0 about every 10
// seconds. The first and last steps, and steps that evaluate or are
// skipped, always get a line of their own.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

class ProgressPrinter {
 public:
  // `terminal`: stdout is one (isatty); `log_every` 0: every 10 s.
  ProgressPrinter(int64_t log_every, bool terminal) : log_every_(log_every), terminal_(terminal) {}

  // Whether 1-based step `step` of `total` gets printed at time `now`
  // (seconds); `keep` forces a line of its own.
  bool Due(int64_t step, int64_t total, bool keep, double now) const;
  // Prints `line` for a step that was due at `now`: a redraw on a
  // terminal (ended with a newline when `keep`), else a line.
  void Print(const std::string& line, bool keep, double now);
  // Ends a redrawn line before other output.
  void EndLine();

  static constexpr double kLogSeconds = 10.0;

 private:
  int64_t log_every_;
  bool terminal_;
  bool pending_ = false;  // a redrawn line without its newline
  double last_ = -1e300;
};

// "42s", "6m02s", "3h04m05s": for times left.
std::string FormatDuration(double seconds);

// Whether progress may redraw one line: stdout is a terminal and no
// launcher stands between it and the user (mpirun hands its ranks
// pseudo-terminals even when its own output goes to a file).
bool StdoutIsATerminal();

}  // namespace ddp
