// `bazel run` starts a program in its runfiles folder and names the folder
// the command was typed in as BUILD_WORKING_DIRECTORY. Relative paths a
// user gives (flags, --output, the sbatch job's .out file) mean that
// folder; binaries that take paths go there first.

#ifndef LLAMA_BASE_WORKING_DIRECTORY_H_
#define LLAMA_BASE_WORKING_DIRECTORY_H_

#include "absl/status/status.h"

namespace llama {

// chdir(BUILD_WORKING_DIRECTORY) when set; nothing otherwise. An error
// names the folder.
absl::Status EnterBazelRunWorkingDirectory();

}  // namespace llama

#endif  // LLAMA_BASE_WORKING_DIRECTORY_H_
