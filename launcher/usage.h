// The launcher's manual: --help's text and its flag groups.

#ifndef LLAMA_LAUNCHER_USAGE_H_
#define LLAMA_LAUNCHER_USAGE_H_

#include <string>
#include <vector>

#include "worker/flag_help.h"

namespace llama {

extern const char kLauncherUsage[];
std::vector<FlagGroup> LauncherFlagGroups();

// `launcher SUBCOMMAND --help`: a first line that says what the subcommand
// does, then only the flags it reads. Any other word (none: the batch job)
// gets the whole manual.
struct LauncherHelp {
  std::string usage;
  std::vector<FlagGroup> groups;
};
LauncherHelp HelpFor(const std::string& subcommand);

// The subcommand on a command line: its first word that is not a flag
// (before any "--"), or "".
std::string SubcommandOf(int argc, char** argv);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_USAGE_H_
