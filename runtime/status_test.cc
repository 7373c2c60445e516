#include "runtime/status.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("--batch-size must be positive, got " + std::to_string(v));
  return v;
}

Status Twice(int v, int* out) {
  ASSIGN_OR_RETURN(int parsed, ParsePositive(v));
  *out = 2 * parsed;
  return Status::Ok();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = DataLoss("weights.safetensors: truncated");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "weights.safetensors: truncated");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(Twice(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = Twice(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--batch-size must be positive, got -1");
  EXPECT_EQ(out, 8);
}

}  // namespace
}  // namespace ddp
