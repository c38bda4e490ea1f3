#include "tools/tool_main.h"

#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "base/exit_code.h"
#include "base/working_directory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/flag_help.h"

namespace llama {

int ReportFailure(const char* name, const absl::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "%s: %s\n", name, std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

absl::Status RanksEnded(int exit_status) {
  constexpr char kWhy[] = "a rank failed (see above)";
  switch (exit_status) {
    case kExitOk:
      return absl::OkStatus();
    case kExitBadInput:
      return absl::InvalidArgumentError(kWhy);
    case kExitCancelled:
      return absl::CancelledError(kWhy);
    default:
      return absl::InternalError(kWhy);
  }
}

int ToolMain(int argc, char** argv, const char* name, const char* usage,
             const std::function<absl::Status(const std::vector<std::string>& args)>& run,
             const std::vector<std::string>& shared_flags, const std::vector<FlagGroup>& more_groups) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  FlagGroup own{absl::StrCat(name, "'s flags"), {}};
  for (const gflags::CommandLineFlagInfo& flag : all) {
    if (absl::EndsWith(flag.filename, absl::StrCat("tools/", name, ".cc"))) own.flags.push_back(flag.name);
  }
  std::vector<FlagGroup> groups = {own};
  groups.insert(groups.end(), more_groups.begin(), more_groups.end());
  if (!shared_flags.empty()) groups.push_back({"The job's flags it takes", shared_flags});
  HandleHelpAndVersion(argc, argv, name, usage, groups);
  gflags::SetUsageMessage(usage);
  ParseFlags(&argc, &argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (absl::Status entered = EnterBazelRunWorkingDirectory(); !entered.ok()) return ReportFailure(name, entered);
  return ReportFailure(name, run(std::vector<std::string>(argv + 1, argv + argc)));
}

}  // namespace llama
