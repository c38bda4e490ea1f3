// Running //launcher (and other binaries) from tests: the fixture job, its
// golden output, and the processes a run leaves.

#ifndef LLAMA_TESTS_LAUNCHER_RUN_H_
#define LLAMA_TESTS_LAUNCHER_RUN_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/process.h"

namespace llama::testing {

std::string TempDir();

// tiny_fp32_mp1's PyTorch golden outputs.
const nlohmann::json& Golden();

// The golden text completions' prompts, as a prompts file (written once).
std::string PromptsFile();

struct LauncherRun {
  std::unique_ptr<Process> process;
  std::string dir;
  std::string out() const;
  std::string err() const;
};

// The exit code once the run ends: -1 when a signal ended it (see
// ExitStatus), -2 when it was still running after `timeout`.
int ExitCodeOf(LauncherRun& run, std::chrono::seconds timeout = std::chrono::seconds(30));

// Runs argv[0] (a path in the runfiles) with only `env`, its output in
// files under TempDir()/name.
LauncherRun RunProgram(const std::string& name, std::vector<std::string> argv, std::vector<std::string> env);

// The launcher with `args`, HOME=TempDir() added to `env`.
LauncherRun Launch(const std::string& name, std::vector<std::string> args, std::vector<std::string> env = {});

// A greedy job over the golden prompts on a fixture checkpoint.
std::vector<std::string> FixtureJob(const std::string& name, int nproc, const std::string& model = "tiny_fp32_mp1");

// Every line of `jsonl` has the golden token ids of its prompt.
void ExpectGoldenOutput(const std::string& jsonl);

// Processes whose parent is `pid`.
std::vector<pid_t> ChildrenOf(pid_t pid);

// None of `pids` is alive (zombies count as gone).
bool AllGone(const std::vector<pid_t>& pids);

}  // namespace llama::testing

#endif  // LLAMA_TESTS_LAUNCHER_RUN_H_
