// Where the launcher and the converter put things: shards of a read-only
// Hugging Face checkpoint, a disk too small for the shards, and a one-node
// job's rendezvous store kept off the machine's other networks.
//
// Read-only storage and a small disk are real here, not simulated: the
// program runs in its own user and mount namespaces (util-linux `unshare
// -Urm`, no privileges needed) over a read-only bind mount or a small tmpfs.

#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/net.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tests/fixtures/test_util.h"
#include "tests/launcher_run.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::ChildrenOf;
using ::llama::testing::ExitCodeOf;
using ::llama::testing::ExpectGoldenOutput;
using ::llama::testing::FixtureJob;
using ::llama::testing::LauncherRun;
using ::llama::testing::PromptsFile;
using ::llama::testing::ReadFileOrEmpty;
using ::llama::testing::RunProgram;
using ::llama::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// `program args...` in a mount namespace where `setup` (shell) ran first.
std::vector<std::string> InNamespace(const std::string& setup, const std::string& program,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/unshare", "-Urm", "/bin/sh", "-c", setup + " && exec \"$0\" \"$@\"",
                                   program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(LauncherStorageTest, ReadOnlyHuggingFaceFolderRunsWithNoFlagAdded) {
  const std::string ckpt = TempDir() + "/readonly/tiny_fp32_hf";
  fs::create_directories(ckpt);
  for (const fs::directory_entry& e : fs::directory_iterator("tests/fixtures/hf_fixture/tiny_fp32_hf")) {
    fs::copy_file(fs::canonical(e.path()), ckpt + "/" + e.path().filename().string());
  }
  const std::string read_only =
      absl::StrCat("mount --bind '", ckpt, "' '", ckpt, "' && mount -o remount,bind,ro '", ckpt, "'");
  for (const char* round : {"first", "again"}) {
    const std::string name = absl::StrCat("readonly_", round);
    // FixtureJob's flags minus --ckpt_dir, --tokenizer_path and --shard_dir:
    // the folder has tokenizer.model, and the shards must find a place.
    std::vector<std::string> args = {"--ckpt_dir=" + ckpt};
    for (const std::string& flag : FixtureJob(name, 2)) {
      if (!absl::StartsWith(flag, "--ckpt_dir=") && !absl::StartsWith(flag, "--tokenizer_path=") &&
          !absl::StartsWith(flag, "--shard_dir=")) {
        args.push_back(flag);
      }
    }
    LauncherRun run = RunProgram(name, InNamespace(read_only, "launcher/launcher", args), {"HOME=" + TempDir()});
    ASSERT_EQ(ExitCodeOf(run, 120s), 0) << run.err();
    ExpectGoldenOutput(TempDir() + "/" + name + "/out.jsonl");  // Meta's tiny_fp32_mp1 golden: same weights.
    const std::string cache = TempDir() + "/.cache/llama2-cpp/shards/tiny_fp32_hf-";
    EXPECT_THAT(run.err(), HasSubstr(" is not writable (read-only storage?): shards go to " + cache)) << round;
    EXPECT_THAT(run.err(), HasSubstr(std::string(round) == "first" ? "launcher: converted to " + cache
                                                                   : "launcher: shards up to date in " + cache));
  }
  EXPECT_FALSE(fs::exists(ckpt + "/shards"));
}

// The launcher on a Hugging Face Llama 3 folder, with no tokenizer flag:
// greedy tokens as PyTorch's golden ones for llama3_bf16_mp1 (same weights).
void ExpectLlama3GoldenTokens(const std::string& name, const std::string& ckpt) {
  std::ifstream golden_file("tests/fixtures/engine_golden/llama3_bf16_mp1/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  const std::string prompts = TempDir() + "/" + name + "_prompts.json";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : golden["text_completions"]) list.push_back(c["prompt"]);
  std::ofstream(prompts) << list.dump();
  const std::string output = TempDir() + "/" + name + ".jsonl";
  LauncherRun run = testing::Launch(
      name, {"--ckpt_dir=" + ckpt, "--shard_dir=" + TempDir() + "/" + name + "_tp2", "--nproc_per_node=2",
             "--prompts_file=" + prompts, "--temperature=0", "--max_gen_len=32", "--max_seq_len=128",
             "--output=" + output});
  ASSERT_EQ(ExitCodeOf(run, 120s), 0) << run.err();
  std::ifstream out(output);
  size_t i = 0;
  for (std::string line; std::getline(out, line); ++i) {
    ASSERT_LT(i, golden["text_completions"].size());
    EXPECT_EQ(nlohmann::json::parse(line)["token_ids"], golden["text_completions"][i]["token_ids"]) << "prompt " << i;
  }
  EXPECT_EQ(i, golden["text_completions"].size());
}

// A Hugging Face Llama 3 repository: safetensors, config.json with
// rope_scaling, Meta's tokenizer.model in original/ (found without a flag).
TEST(LauncherStorageTest, HuggingFaceLlama3RepositoryRunsAsIs) {
  ExpectLlama3GoldenTokens("hf_llama3", "tests/fixtures/hf_fixture/llama3_bf16_hf");
}

// The same folder with Hugging Face's tokenizer.json in place of original/:
// the same tokens.
TEST(LauncherStorageTest, HuggingFaceLlama3FolderWithOnlyTokenizerJsonRunsAsIs) {
  const std::string ckpt = TempDir() + "/json_only/llama3_bf16_hf";
  fs::create_directories(ckpt);
  for (const char* f : {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json"}) {
    fs::copy_file(fs::canonical(std::string("tests/fixtures/hf_fixture/llama3_bf16_hf/") + f), ckpt + "/" + f);
  }
  fs::copy_file(fs::canonical("tests/fixtures/tokenizer_json_fixture/tokenizer.json"), ckpt + "/tokenizer.json");
  ExpectLlama3GoldenTokens("hf_llama3_json", ckpt);
}

// The tokens of a greedy job's JSON Lines output.
std::vector<std::vector<int>> OutputTokens(const std::string& jsonl) {
  std::vector<std::vector<int>> tokens;
  for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(jsonl), '\n', absl::SkipEmpty())) {
    tokens.push_back(nlohmann::json::parse(line)["token_ids"].get<std::vector<int>>());
  }
  return tokens;
}

// llama.cpp's file (llama-quantize's Q4_K_M) as --ckpt_dir: its own
// vocabulary, rebuilt from the metadata, gives the tokens the fixture's
// tokenizer.model gives; its shards and tokenizer go beside it. A dialog job
// in another tokenizer's chat format is refused before any work.
TEST(LauncherStorageTest, AGgufFileRunsWithTheTokenizerItCarries) {
  const std::string dir = TempDir() + "/gguf_ckpt";
  fs::create_directories(dir);
  fs::copy_file(fs::canonical("checkpoint/testdata/gguf/Q4_K_M.gguf"), dir + "/model.gguf");
  const std::vector<std::string> job = {"--ckpt_dir=" + dir + "/model.gguf", "--prompt=I believe the meaning of life is",
                                        "--temperature=0", "--max_gen_len=16", "--logprobs"};
  std::vector<std::string> own = job, fixture = job;
  own.push_back("--output=" + dir + "/own.jsonl");
  fixture.push_back("--output=" + dir + "/fixture.jsonl");
  fixture.push_back("--tokenizer_path=" + testing::TokenizerFixturePath("tokenizer.model"));
  LauncherRun with_own = testing::Launch("gguf_own", own);
  ASSERT_EQ(ExitCodeOf(with_own, 120s), 0) << with_own.err();
  LauncherRun with_fixture = testing::Launch("gguf_fixture", fixture);
  ASSERT_EQ(ExitCodeOf(with_fixture, 120s), 0) << with_fixture.err();
  EXPECT_EQ(OutputTokens(dir + "/own.jsonl"), OutputTokens(dir + "/fixture.jsonl"));
  EXPECT_EQ(OutputTokens(dir + "/own.jsonl").size(), 1u);
  EXPECT_TRUE(fs::exists(dir + "/model.gguf.shards/tp1.tokenizer.model"));
  EXPECT_TRUE(fs::exists(dir + "/model.gguf.shards/tp1/rank-0-of-1.shard"));
  // tools/convert's shards of the file carry its tokenizer too: the folder
  // alone as --ckpt_dir gives the same tokens.
  LauncherRun convert = RunProgram(
      "gguf_convert", {"tools/convert", "--progress=false", "--ckpt_dir=" + dir + "/model.gguf", "--out_dir=" + dir + "/tp1"},
      {});
  ASSERT_EQ(ExitCodeOf(convert), 0) << convert.err();
  EXPECT_THAT(convert.out(), HasSubstr("with the GGUF's tokenizer.model"));
  LauncherRun converted = testing::Launch("gguf_converted", {"--ckpt_dir=" + dir + "/tp1", "--prompt=I believe the meaning of life is",
                                                             "--temperature=0", "--max_gen_len=16", "--logprobs",
                                                             "--output=" + dir + "/converted.jsonl"});
  ASSERT_EQ(ExitCodeOf(converted, 120s), 0) << converted.err();
  EXPECT_EQ(OutputTokens(dir + "/converted.jsonl"), OutputTokens(dir + "/fixture.jsonl"));
  LauncherRun llama3 = testing::Launch("gguf_llama3_chat", {"--ckpt_dir=" + dir + "/model.gguf", "--chat_format=llama3",
                                                            "--dialogs_file=tests/fixtures/dialogs.json"});
  EXPECT_EQ(ExitCodeOf(llama3), 2) << llama3.err();
  EXPECT_THAT(llama3.err(), HasSubstr("the chat format is Llama 3's but the tokenizer is SentencePiece"));
}

// A Hugging Face Llama 2 copy without tokenizer.model: with no tokenizer at
// all, and with only Llama 2's SentencePiece-style tokenizer.json, the
// launcher says what is missing.
TEST(LauncherStorageTest, HuggingFaceLlama2FolderWithoutTokenizerModelSaysWhatToPass) {
  const std::string ckpt = TempDir() + "/json_only/tiny_fp32_hf";
  fs::create_directories(ckpt);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::canonical(std::string("tests/fixtures/hf_fixture/tiny_fp32_hf/") + f), ckpt + "/" + f);
  }
  LauncherRun none = testing::Launch("no_tokenizer", {"--ckpt_dir=" + ckpt, "--prompt=hi"});
  EXPECT_EQ(ExitCodeOf(none), 2) << none.err();
  EXPECT_THAT(none.err(), HasSubstr("no tokenizer.model in or next to " + ckpt +
                                    " and no tokenizer.json in it; pass --tokenizer_path"));
  std::ofstream(ckpt + "/tokenizer.json")
      << R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}]},
             "pre_tokenizer": null, "added_tokens": [],
             "model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0}, "merges": []}})";
  LauncherRun llama2_json = testing::Launch("llama2_json", {"--ckpt_dir=" + ckpt, "--prompt=hi"});
  EXPECT_EQ(ExitCodeOf(llama2_json), 2) << llama2_json.err();
  EXPECT_THAT(llama2_json.err(), HasSubstr(ckpt + "/tokenizer.json\": model is a BPE with byte_fallback; expected "
                                           "Llama 3's byte-level BPE (for a SentencePiece model such as Llama 2's, "
                                           "pass its tokenizer.model)"));
  EXPECT_FALSE(fs::exists(ckpt + "/shards"));
}

TEST(LauncherStorageTest, ConverterRefusesADiskTooSmallBeforeWriting) {
  const std::string disk = TempDir() + "/small_disk";
  fs::create_directories(disk);
  // 256 KiB of tmpfs; tiny_fp32_mp1's shards need about 0.75 MB.
  const std::string small = absl::StrCat("mount -t tmpfs -o size=256k tmpfs '", disk, "'");
  LauncherRun run = RunProgram(
      "small_disk", InNamespace(small, "/bin/sh", {"-c", "\"$@\"; rc=$?; ls -A \"$0\"; exit $rc", disk + "/shards",
                                                    "tools/convert",
                                                    "--ckpt_dir=" + testing::CheckpointFixturePath("tiny_fp32_mp1"),
                                                    "--out_dir=" + disk + "/shards/tp1", "--progress=false"}),
      {});
  EXPECT_EQ(ExitCodeOf(run), 1) << run.err();  // A full disk is the machine's, not the input's.
  // In units that show the sizes (#33: it said "0.00 GB needed, 0.00 GB is free").
  EXPECT_THAT(run.err(), ::testing::ContainsRegex("not enough free space for the shards in \"" + disk +
                                                  "/shards\": [0-9.]+ kB needed, [0-9.]+ kB is free"));
  EXPECT_EQ(run.out(), "") << "left behind in the shard folder";

  // The same for one GGUF file.
  LauncherRun gguf = RunProgram(
      "small_disk_gguf",
      InNamespace(small, "/bin/sh",
                  {"-c", "\"$@\"; rc=$?; ls -A \"$0\"; exit $rc", disk, "tools/convert",
                   "--ckpt_dir=" + testing::CheckpointFixturePath("tiny_fp32_mp1"), "--format=gguf",
                   "--out=" + disk + "/tiny.gguf", "--tokenizer_path=" + testing::TokenizerFixturePath("tokenizer.model"),
                   "--progress=false"}),
      {});
  EXPECT_EQ(ExitCodeOf(gguf), 1) << gguf.err();
  EXPECT_THAT(gguf.err(), ::testing::ContainsRegex("not enough free space for the GGUF file in \"" + disk +
                                                   "\": [0-9.]+ kB needed, [0-9.]+ kB is free"));
  EXPECT_EQ(gguf.out(), "") << "left behind on the disk";
}

// This machine's IPv4 addresses other than loopback.
std::vector<std::string> OtherAddresses() {
  std::vector<std::string> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (!absl::StartsWith(text, "127.")) found.push_back(text);
  }
  freeifaddrs(list);
  return found;
}

TEST(LauncherStorageTest, OneNodeJobsStoreListensOnLoopbackOnly) {
  const std::vector<std::string> others = OtherAddresses();
  ASSERT_FALSE(others.empty()) << "this test needs a network interface besides loopback";
  std::vector<std::string> args = FixtureJob("loopback_store", 2);
  args.push_back("--max_seq_len=4096");
  args.push_back("--max_gen_len=4000");
  LauncherRun run = testing::Launch("loopback_store", args);
  // Rank 0 hosts the store on MASTER_PORT once the workers run.
  int port = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 60s; port == 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
    for (pid_t worker : ChildrenOf(run.process->pid())) {
      for (absl::string_view var : absl::StrSplit(ReadFileOrEmpty(absl::StrCat("/proc/", worker, "/environ")), '\0')) {
        if (absl::ConsumePrefix(&var, "MASTER_PORT=")) port = std::stoi(std::string(var));
      }
    }
  }
  ASSERT_GT(port, 0) << run.err();
  const net::Deadline soon = std::chrono::steady_clock::now() + 5s;
  EXPECT_TRUE(net::Connect("127.0.0.1", port, soon).ok());
  for (const std::string& address : others) {
    absl::StatusOr<net::Socket> outside = net::Connect(address, port, std::chrono::steady_clock::now() + 1s);
    EXPECT_FALSE(outside.ok()) << "the store answers on " << address << ":" << port;
  }
  ::kill(run.process->pid(), SIGTERM);
  EXPECT_EQ(ExitCodeOf(run), 130) << run.err();
}

// Two launchers started at once on a checkpoint never converted (shared
// storage, two users or two jobs): both give the golden answers, and only
// one of them converts.
TEST(LauncherStorageTest, TwoLaunchersAtOnceShareOneConversion) {
  const std::string ckpt = TempDir() + "/fresh_ckpt";
  fs::create_directories(ckpt);
  for (const char* f : {"consolidated.00.pth", "params.json"}) {
    fs::copy_file(testing::CheckpointFixturePath(std::string("tiny_fp32_mp1/") + f), ckpt + "/" + f);
  }
  std::vector<LauncherRun> runs;
  for (const char* name : {"together_a", "together_b"}) {
    std::vector<std::string> args = FixtureJob(name, 2);
    args[0] = "--ckpt_dir=" + ckpt;
    args[2] = "--shard_dir=" + TempDir() + "/together_shards";
    runs.push_back(testing::Launch(name, args));
  }
  int converted = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(ExitCodeOf(runs[i], 120s), 0) << runs[i].err();
    converted += absl::StrContains(runs[i].err(), "launcher: converted to");
    ExpectGoldenOutput(TempDir() + (i == 0 ? "/together_a" : "/together_b") + "/out.jsonl");
  }
  EXPECT_EQ(converted, 1);
}

// Under `bazel run` (BUILD_WORKING_DIRECTORY set) relative paths are the
// user's: --output lands where the command was typed, not in the runfiles.
TEST(LauncherStorageTest, RelativePathsUnderBazelRunAreTheUsers) {
  const std::string typed_in = TempDir() + "/typed_in";
  fs::create_directories(typed_in);
  std::vector<std::string> args = FixtureJob("bazel_run", 1);
  args[0] = "--ckpt_dir=" + fs::absolute(testing::CheckpointFixturePath("tiny_fp32_mp1")).string();
  args[1] = "--tokenizer_path=" + fs::absolute(testing::TokenizerFixturePath("tokenizer.model")).string();
  args.back() = "--output=answers.jsonl";
  LauncherRun run = testing::Launch("bazel_run", args, {"BUILD_WORKING_DIRECTORY=" + typed_in});
  ASSERT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
  ExpectGoldenOutput(typed_in + "/answers.jsonl");
}

}  // namespace
}  // namespace llama
