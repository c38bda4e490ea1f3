#include "base/working_directory.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace llama {

absl::Status EnterBazelRunWorkingDirectory() {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (dir == nullptr || *dir == '\0') return absl::OkStatus();
  if (chdir(dir) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot enter BUILD_WORKING_DIRECTORY %s (where bazel run was typed): %s", dir,
                        std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace llama
