// The common start of an op test against the float64 references: the
// references, the gradient checker and the tensor helpers, with the names
// every such test uses (RandomValues, ToDoubles, ToF32Tensor, Vec) made
// usable unqualified in namespace ddp. For test sources only.
#pragma once

#include "runtime/testing/gradient_checker.h"
#include "runtime/testing/reference_ops.h"
#include "runtime/testing/tensor_testing.h"

namespace ddp {

using testing::RandomValues;
using testing::ToDoubles;
using testing::ToF32Tensor;
using testing::Vec;

}  // namespace ddp
