#include "tools/tool_main.h"

#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

namespace llama {

int ReportFailure(const char* name, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", name, std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int ToolMain(int argc, char** argv, const char* name, const char* usage,
             const std::function<absl::Status(const std::vector<std::string>& args)>& run) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  return ReportFailure(name, run(std::vector<std::string>(argv + 1, argv + argc)));
}

}  // namespace llama
