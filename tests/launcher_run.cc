#include "tests/launcher_run.h"

#include <dirent.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama::testing {

std::string TempDir() { return getenv("TEST_TMPDIR"); }

const nlohmann::json& Golden() {
  static const nlohmann::json* golden = [] {
    std::ifstream in("tests/fixtures/engine_golden/tiny_fp32_mp1/golden.json");
    return new nlohmann::json(nlohmann::json::parse(in));
  }();
  return *golden;
}

std::string PromptsFile() {
  // Written once: rewriting it for a second node while the first node's
  // launcher reads it made that launcher see an empty file.
  static const std::string* path = [] {
    auto* written = new std::string(TempDir() + "/prompts.json");
    nlohmann::json prompts = nlohmann::json::array();
    for (const auto& c : Golden()["text_completions"]) prompts.push_back(c["prompt"]);
    std::ofstream(*written) << prompts.dump();
    return written;
  }();
  return *path;
}

std::string LauncherRun::out() const { return ReadFileOrEmpty(dir + "/stdout"); }
std::string LauncherRun::err() const { return ReadFileOrEmpty(dir + "/stderr"); }

int ExitCodeOf(LauncherRun& run, std::chrono::seconds timeout) {
  absl::StatusOr<ExitStatus> exit = run.process->Wait(timeout);
  return exit.ok() ? exit->code : -2;
}

LauncherRun RunProgram(const std::string& name, std::vector<std::string> argv, std::vector<std::string> env) {
  LauncherRun run;
  run.dir = TempDir() + "/" + name;
  std::filesystem::create_directories(run.dir);
  ProcessOptions options;
  options.argv = std::move(argv);
  options.env = std::move(env);
  options.stdout_path = run.dir + "/stdout";
  options.stderr_path = run.dir + "/stderr";
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn(options);
  EXPECT_TRUE(p.ok()) << p.status();
  run.process = *std::move(p);
  return run;
}

LauncherRun Launch(const std::string& name, std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), "launcher/launcher");
  env.push_back("HOME=" + TempDir());
  return RunProgram(name, std::move(args), std::move(env));
}

std::vector<std::string> FixtureJob(const std::string& name, int nproc, const std::string& model) {
  return {"--ckpt_dir=" + CheckpointFixturePath(model),
          "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
          absl::StrCat("--shard_dir=", TempDir(), "/shards_", model, "_", nproc),
          absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"),
          absl::StrCat("--nproc_per_node=", nproc),
          "--prompts_file=" + PromptsFile(),
          "--temperature=0",
          "--max_gen_len=32",
          "--max_seq_len=128",
          "--logprobs",
          absl::StrCat("--output=", TempDir(), "/", name, "/out.jsonl")};
}

void ExpectGoldenOutput(const std::string& jsonl) {
  std::ifstream in(jsonl);
  const auto& expected = Golden()["text_completions"];
  size_t i = 0;
  for (std::string line; std::getline(in, line); ++i) {
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(nlohmann::json::parse(line)["token_ids"], expected[i]["token_ids"]) << "prompt " << i;
  }
  EXPECT_EQ(i, expected.size());
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", entry->d_name, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    const std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    if (fields.size() > 2 && fields[1] == std::to_string(pid)) children.push_back(std::stoi(entry->d_name));
  }
  closedir(proc);
  return children;
}

bool AllGone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (::kill(pid, 0) == 0 && ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat")).find(") Z") == std::string::npos) return false;
  }
  return true;
}

}  // namespace llama::testing
