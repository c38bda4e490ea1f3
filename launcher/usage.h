// The launcher's manual: --help's text and its flag groups.

#ifndef LLAMA_LAUNCHER_USAGE_H_
#define LLAMA_LAUNCHER_USAGE_H_

#include <vector>

#include "worker/flag_help.h"

namespace llama {

extern const char kLauncherUsage[];
std::vector<FlagGroup> LauncherFlagGroups();

}  // namespace llama

#endif  // LLAMA_LAUNCHER_USAGE_H_
