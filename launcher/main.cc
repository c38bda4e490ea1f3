// //launcher: what torchrun and the reference's example scripts do for a
// Python user: prepare shards, start one worker per rank with the job's
// environment, supervise them, and print rank 0's results.
// See --help (the usage message below) for the manual.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/status/status.h"
#include "base/exit_code.h"
#include "base/working_directory.h"
#include "launcher/launch.h"
#include "launcher/launch_plan.h"
#include "launcher/launcher_flags.h"
#include "launcher/usage.h"
#include "worker/flag_help.h"

namespace llama {
namespace {

// The launcher's exit status for `status`, after its one line: the rule of
// every binary (base/exit_code.h). A rank that failed comes as Internal,
// so 1 whatever the rank found, its exit status and last line being in the
// message; so does a batch job with prompts that could not run ("rank 0
// failed (exit code 1): 1 of 5 prompts could not run ...").
int ExitCode(const absl::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "launcher: %s\n", std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

}  // namespace
}  // namespace llama

int main(int argc, char** argv) {
  const llama::LauncherHelp help = llama::HelpFor(llama::SubcommandOf(argc, argv));
  llama::HandleHelpAndVersion(argc, argv, "launcher", help.usage, help.groups);
  gflags::SetUsageMessage(llama::kLauncherUsage);
  const std::vector<std::string> given(argv, argv + argc);
  llama::ParseFlags(&argc, &argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (absl::Status entered = llama::EnterBazelRunWorkingDirectory(); !entered.ok()) {
    return llama::ExitCode(entered);
  }
  std::vector<std::string> words(argv + 1, argv + argc);
  words.erase(std::remove(words.begin(), words.end(), "--"), words.end());
  absl::StatusOr<llama::LaunchPlan> plan =
      llama::PlanLaunch(std::move(words), llama::LauncherFlagsFromCommandLine(given), llama::CurrentContext());
  if (!plan.ok()) return llama::ExitCode(plan.status());
  return llama::ExitCode(llama::Execute(*std::move(plan)));
}
