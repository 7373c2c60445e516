// Seconds on the steady clock: the one timebase for step, bucket and
// collective timings, so they can be compared with each other.
#pragma once

#include <chrono>

namespace ddp {

inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ddp
