// --help (also -h, --helpshort, --helpfull) and --version for our binaries,
// in place of gflags' own: the binary's flags grouped as it lists them,
// defaults written as set ("0.6", not "0.59999999999999998"), the logging
// library's flags left out but --log_dir, exit 0; and the flags' parse,
// whose refusals exit 2. Binaries only.

#ifndef LLAMA_WORKER_FLAG_HELP_H_
#define LLAMA_WORKER_FLAG_HELP_H_

#include <initializer_list>
#include <string>
#include <vector>

namespace llama {

struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;  // Names, in the order shown.
};

// `parts`, one after another: a group's names from several lists (a flag
// table's group among a binary's own flags).
std::vector<std::string> FlagList(std::initializer_list<std::vector<std::string>> parts);

// --log_dir is glog's flag, reused: its description as our binaries use it.
inline constexpr char kLogDirHelp[] =
    "Per-rank logs, rank<R>.log (launcher; default: a folder per run under ~/.cache/llama2-cpp/logs). The worker "
    "and the tools log to stderr.";

// The help text for `usage` and `groups`.
std::string FlagHelp(const std::string& usage, const std::vector<FlagGroup>& groups);

// The version line: the release, the commit this binary was built from, and
// what it can run on (the CUDA backend or why not; the CPU kernels this
// machine runs).
std::string VersionText(const std::string& binary);

// Call first in main(): prints the help or the version and exits 0 when
// argv asks for one, else returns.
void HandleHelpAndVersion(int argc, char** argv, const std::string& binary, const std::string& usage,
                          const std::vector<FlagGroup>& groups);

// gflags::ParseCommandLineFlags (flags removed from argv), except that a
// flag it refuses (unknown, a bad value, a --flagfile not there) exits
// kExitBadInput like any other wrong input (base/exit_code.h), not
// gflags' 1.
void ParseFlags(int* argc, char*** argv);

}  // namespace llama

#endif  // LLAMA_WORKER_FLAG_HELP_H_
