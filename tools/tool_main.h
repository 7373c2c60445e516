// How a tool in tools/ ends: its body returns a Status, and an error is one
// line "NAME: message" on stderr with exit status 1. A failed allocation
// (std::bad_alloc, std::length_error from a size no vector can hold) ends
// the same way, so no std:: exception text or core dump reaches a user;
// sizes from flags are checked before that, naming the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/status.h"

namespace ddp {

int RunTool(const char* name, const std::function<Status()>& body);

// `count` elements of `bytes_each` bytes, from the flags named in `flags`:
// refused, naming them, past the memory this process may have (the
// machine's, or its container's limit where that is less).
Status CheckFlagSize(const std::string& flags, int64_t count, int64_t bytes_each);

}  // namespace ddp
