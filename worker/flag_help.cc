#include "worker/flag_help.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <gflags/gflags.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_code.h"
#include "ops/cpu/linear.h"
#include "ops/device.h"
#include "worker/build_version.h"

// gflags' exit on a refused flag: exported, though in no header, for
// gflags' own tests of that exit; the one way to choose its status.
namespace GFLAGS_NAMESPACE {
extern GFLAGS_DLL_DECL void (*gflags_exitfunc)(int);
}  // namespace GFLAGS_NAMESPACE

namespace llama {
namespace {

// gflags calls it with 1 after printing "ERROR: unknown command line flag".
[[noreturn]] void ExitBadInput(int /*gflags_code*/) { std::exit(kExitBadInput); }

// A default as it was written: doubles in their shortest form.
std::string ShownDefault(const gflags::CommandLineFlagInfo& flag) {
  if (flag.type == "double") {
    double value = 0;
    if (absl::SimpleAtod(flag.default_value, &value)) return absl::StrCat(value);
  }
  if (flag.type == "string") return absl::StrCat("\"", flag.default_value, "\"");
  return flag.default_value;
}

}  // namespace

std::vector<std::string> FlagList(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> names;
  for (const std::vector<std::string>& part : parts) names.insert(names.end(), part.begin(), part.end());
  return names;
}

std::string FlagHelp(const std::string& usage, const std::vector<FlagGroup>& groups) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::map<std::string, gflags::CommandLineFlagInfo> by_name;
  for (const gflags::CommandLineFlagInfo& flag : all) by_name[flag.name] = flag;
  std::string text = usage;
  if (!text.empty() && text.back() != '\n') text += "\n";
  for (const FlagGroup& group : groups) {
    absl::StrAppend(&text, "\n", group.title, ":\n");
    for (const std::string& name : group.flags) {
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;  // Not in this build (a CUDA-only flag, say).
      const gflags::CommandLineFlagInfo& flag = it->second;
      absl::StrAppend(&text, "  --", name, "  (", flag.type, ", default ", ShownDefault(flag), ")\n      ",
                      name == "log_dir" ? kLogDirHelp : flag.description, "\n");
    }
  }
  absl::StrAppend(&text, "\n  --help, -h  this text;  --version  the version and build\n");
  return text;
}

std::string VersionText(const std::string& binary) {
  std::string cpu = "baseline x86-64";
  for (const char* kernel : {"avx512", "avx2"}) {
    if (std::string_view(cpu::PrefillKernel()) == kernel) cpu = kernel;
  }
  return absl::StrFormat("%s (llama2-cpp %s, commit %s): CUDA backend %s; CPU kernels: %s prefill, %s\n", binary,
                         kLlamaVersion, kBuildCommit, BuiltWithCuda() ? "built in" : "not built in (no toolkit)",
                         cpu, "16-bit weights widened in registers (F16C where the CPU has it)");
}

void HandleHelpAndVersion(int argc, char** argv, const std::string& binary, const std::string& usage,
                          const std::vector<FlagGroup>& groups) {
  static const std::set<std::string> kHelp = {"--help", "-h", "--helpshort", "--helpfull", "-help", "-helpshort"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (kHelp.count(arg) > 0) {
      std::fputs(FlagHelp(usage, groups).c_str(), stdout);
      std::exit(kExitOk);
    }
    if (arg == "--version" || arg == "-version") {
      std::fputs(VersionText(binary).c_str(), stdout);
      std::exit(kExitOk);
    }
  }
}

void ParseFlags(int* argc, char*** argv) {
  // Only the flags' own parse: gflags' help flags (--helpxml, --helpon, ...)
  // keep its exits.
  void (*const gflags_exit)(int) = GFLAGS_NAMESPACE::gflags_exitfunc;
  GFLAGS_NAMESPACE::gflags_exitfunc = &ExitBadInput;
  gflags::ParseCommandLineNonHelpFlags(argc, argv, /*remove_flags=*/true);
  GFLAGS_NAMESPACE::gflags_exitfunc = gflags_exit;
  gflags::HandleCommandLineHelpFlags();
}

}  // namespace llama
