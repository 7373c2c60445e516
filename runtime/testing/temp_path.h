// A file's path in the test's own temporary directory: Bazel's
// TEST_TMPDIR, or /tmp run by hand. For test sources only.
#pragma once

#include <cstdlib>
#include <string>

namespace ddp::testing {

inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace ddp::testing
