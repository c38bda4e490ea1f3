#include "base/exit_code.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(ExitCodeTest, SuccessAndCancellation) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("interrupted")), kExitCancelled);
  EXPECT_EQ(kExitCancelled, 128 + 2) << "a shell's status for a program SIGINT ended";
}

TEST(ExitCodeTest, WhatTheUserMustFixIsBadInput) {
  for (const absl::Status& status :
       {absl::InvalidArgumentError("--max_gen_len=-2"), absl::NotFoundError("--ckpt_dir does not exist"),
        absl::FailedPreconditionError("--port=8000 is already in use"),
        absl::PermissionDeniedError("--log_dir: cannot create"), absl::UnimplementedError("big-endian checkpoint"),
        absl::OutOfRangeError("past the end"), absl::AlreadyExistsError("there"),
        absl::UnauthenticatedError("who")}) {
    EXPECT_EQ(ExitCodeFor(status), kExitBadInput) << status;
  }
}

TEST(ExitCodeTest, ARunThatFailedMayBeRetried) {
  for (const absl::Status& status :
       {absl::InternalError("rank 1 failed"), absl::UnavailableError("lost rank 1"),
        absl::DeadlineExceededError("3/4 ranks joined"), absl::ResourceExhaustedError("disk full"),
        absl::DataLossError("read failed"), absl::AbortedError("1 of 5 prompts could not run"),
        absl::UnknownError("?")}) {
    EXPECT_EQ(ExitCodeFor(status), kExitFailed) << status;
  }
}

}  // namespace
}  // namespace llama
