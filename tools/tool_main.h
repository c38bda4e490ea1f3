// One way in and out for the command-line tools: flags and logging set up
// the same way in each, the tool's work returns a Status, and a failure is
// printed once, as "<tool>: <message>", with the exit status every binary
// gives (base/exit_code.h: 2 for a wrong input, 1 for a run that failed).

#ifndef LLAMA_TOOLS_TOOL_MAIN_H_
#define LLAMA_TOOLS_TOOL_MAIN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/flag_help.h"

namespace llama {

// `run` gets the positional arguments left after the flags. --help lists
// the flags defined in tools/<name>.cc, then `more_groups` (flags of a
// library the tool shares with others), then `shared_flags` (the job's
// flags the tool takes, worker/job_flags.h); --version prints the build.
int ToolMain(int argc, char** argv, const char* name, const char* usage,
             const std::function<absl::Status(const std::vector<std::string>& args)>& run,
             const std::vector<std::string>& shared_flags = {}, const std::vector<FlagGroup>& more_groups = {});

// The exit code for `status`, after printing it as above when it failed.
int ReportFailure(const char* name, const absl::Status& status);

// OK for a tool whose ranks (tools/local_ranks.h) ended with exit status
// 0; else an error that exits with the same status, the ranks having
// printed why.
absl::Status RanksEnded(int exit_status);

}  // namespace llama

#endif  // LLAMA_TOOLS_TOOL_MAIN_H_
