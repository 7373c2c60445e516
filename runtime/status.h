// Recoverable errors as values: a user's bad file, flag or tensor becomes a
// Status whose message names what is at fault. Internal invariants use CHECK.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <glog/logging.h>

namespace ddp {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kDataLoss,  // a file is truncated or malformed
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
  kDeadlineExceeded,  // something waited on (a peer rank, a collective) did not come in time
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }

// A value or the error that prevented it.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "StatusOr built from an OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T& value() & {
    CHECK(ok()) << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << status_.ToString();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

// Input that makes training impossible, found where no Status can be
// returned (a loader thread inside a parallel loop): thrown, and printed by
// the program's top level as its one line (what() names the flag and
// file). Any other exception that reaches the top is a bug.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ddp

#define DDP_STATUS_CONCAT_INNER(a, b) a##b
#define DDP_STATUS_CONCAT(a, b) DDP_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    ::ddp::Status _status = (expr);      \
    if (!_status.ok()) return _status;   \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(DDP_STATUS_CONCAT(_status_or_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
