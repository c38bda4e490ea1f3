#include "launcher/launcher_flags.h"

#include <gflags/gflags.h>

#include "launcher/download_command.h"

#define LLAMA_DEFINE_LAUNCHER_FLAG(type, name, default_value, group, help) \
  DEFINE_##type(name, default_value, help);
LLAMA_LAUNCHER_FLAGS(LLAMA_DEFINE_LAUNCHER_FLAG)
#undef LLAMA_DEFINE_LAUNCHER_FLAG

// --log_dir (per-rank logs; default one folder per run under
// ~/.cache/llama2-cpp/logs) is glog's flag, reused: the launcher logs to
// stderr, so glog writes no files there.
DECLARE_string(log_dir);

namespace llama {

std::vector<std::string> RepeatedFlagValues(const std::vector<std::string>& given, const std::string& name) {
  std::vector<std::string> values;
  for (const std::string& arg : given) {
    for (const std::string& prefix : {"--" + name + "=", "-" + name + "="}) {
      if (arg.compare(0, prefix.size(), prefix) == 0) {
        values.push_back(arg.substr(prefix.size()));
        break;
      }
    }
  }
  return values;
}

LauncherFlags LauncherFlagsFromCommandLine(const std::vector<std::string>& given) {
  LauncherFlags flags;
#define LLAMA_COPY_LAUNCHER_FLAG(type, name, default_value, group, help) flags.name = FLAGS_##name;
  LLAMA_LAUNCHER_FLAGS(LLAMA_COPY_LAUNCHER_FLAG)
#undef LLAMA_COPY_LAUNCHER_FLAG
  flags.nproc_per_node_given = !gflags::GetCommandLineFlagInfoOrDie("nproc_per_node").is_default;
  flags.master_addr_given = !gflags::GetCommandLineFlagInfoOrDie("master_addr").is_default;
  flags.worker_environment = RepeatedFlagValues(given, "worker_env");
  flags.sbatch_options = RepeatedFlagValues(given, "sbatch_arg");
  flags.log_dir = FLAGS_log_dir;
  flags.download_models = FLAGS_models;
  flags.download_target_dir = FLAGS_target_dir;
  flags.job = JobFlagsFromCommandLine();
  return flags;
}

std::vector<std::string> LauncherFlagNames(LauncherFlagGroup group) {
  std::vector<std::string> names;
#define LLAMA_LAUNCHER_FLAG_NAME(type, name, default_value, flag_group, help) \
  if (LauncherFlagGroup::flag_group == group) names.push_back(#name);
  LLAMA_LAUNCHER_FLAGS(LLAMA_LAUNCHER_FLAG_NAME)
#undef LLAMA_LAUNCHER_FLAG_NAME
  return names;
}

}  // namespace llama
