#include "runtime/status.h"

namespace ddp {

std::string Status::ToString() const {
  if (ok()) return "OK";
  return message_;
}

}  // namespace ddp
