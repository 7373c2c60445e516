// Argument checks shared by the op front ends. A failure here is a bug in
// the caller (layers build op arguments), so it is a CHECK naming the op.
#pragma once

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp {

inline void CheckOnCpu(const ExecutionContext& ctx, const char* op) {
  CHECK(ctx.device().is_cpu()) << op << " has no kernel for " << ctx.device().ToString() << " yet";
}

inline void CheckF32(const Tensor& t, const char* what) {
  CHECK(t.defined()) << what << " is undefined";
  CHECK(t.dtype() == DType::kF32) << what << " must be f32, got " << t.DebugString();
}

inline void CheckSameShape(const Tensor& expected, const Tensor& t, const char* what) {
  CHECK(t.defined()) << what << " is undefined";
  CHECK(t.shape() == expected.shape()) << what << " " << t.DebugString() << " must have shape "
                                       << ShapeToString(expected.shape());
}

}  // namespace ddp
