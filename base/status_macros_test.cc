#include "base/status_macros.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace llama {
namespace {

int calls = 0;

absl::Status Fails(absl::string_view why) {
  ++calls;
  return absl::InvalidArgumentError(why);
}

absl::StatusOr<std::unique_ptr<std::string>> Made(bool ok) {
  ++calls;
  if (!ok) return absl::NotFoundError("nothing to make");
  return std::make_unique<std::string>("made");
}

absl::Status Chain(bool first_ok) {
  RETURN_IF_ERROR(first_ok ? absl::OkStatus() : Fails("first"));
  RETURN_IF_ERROR(Fails("second"));
  return absl::OkStatus();
}

absl::StatusOr<size_t> Length(bool ok) {
  ASSIGN_OR_RETURN(std::unique_ptr<std::string> text, Made(ok));  // Move-only values.
  ASSIGN_OR_RETURN(auto again, Made(true));
  return text->size() + again->size();
}

TEST(StatusMacrosTest, ReturnsTheFirstErrorUnchangedAndEvaluatesOnce) {
  calls = 0;
  EXPECT_EQ(Chain(false).message(), "first");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Chain(true).message(), "second");
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacrosTest, AssignsOrReturns) {
  calls = 0;
  EXPECT_EQ(*Length(true), 8u);
  EXPECT_EQ(calls, 2);
  const absl::StatusOr<size_t> failed = Length(false);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace llama
