// //launcher end to end: real worker processes on the fixtures, compared
// with the PyTorch golden outputs; faults; several "nodes" on one machine;
// SLURM placement and sbatch with a fake sbatch.

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/net.h"
#include "base/process.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/shard_format.h"
#include "ops/device.h"
#include "tests/fixtures/test_util.h"
#include "tests/launcher_run.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::AllGone;
using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::TokenizerFixturePath;
using ::llama::testing::ChildrenOf;
using ::llama::testing::ExitCodeOf;
using ::llama::testing::ExpectGoldenOutput;
using ::llama::testing::FixtureJob;
using ::llama::testing::Golden;
using ::llama::testing::Launch;
using ::llama::testing::LauncherRun;
using ::llama::testing::PromptsFile;
using ::llama::testing::ReadFileOrEmpty;
using ::llama::testing::RunProgram;
using ::llama::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::EndsWith;
using ::testing::Not;
using namespace std::chrono_literals;

class LauncherTest : public ::testing::TestWithParam<int> {};

TEST_P(LauncherTest, GoldenOutputWithLocalWorkers) {
  const int nproc = GetParam();
  const std::string name = absl::StrCat("local_", nproc);
  LauncherRun run = Launch(name, FixtureJob(name, nproc));
  absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
  ASSERT_TRUE(exit.ok());
  ASSERT_TRUE(exit->success()) << run.err();
  ExpectGoldenOutput(TempDir() + "/" + name + "/out.jsonl");
  // Rank 0's results on stdout, as the reference's example script prints them.
  EXPECT_THAT(run.out(), HasSubstr("I believe the meaning of life is\n> "));
  EXPECT_THAT(run.err(), HasSubstr(absl::StrCat("launcher: ", nproc, " rank(s) on 1 node(s) done")));
  EXPECT_THAT(ReadFileOrEmpty(TempDir() + "/" + name + "/logs/rank0.log"), HasSubstr("[rank 0] "));
}

INSTANTIATE_TEST_SUITE_P(Workers, LauncherTest, ::testing::Values(1, 2, 4));

// Another model's checkpoint folder as a draft: the GQA fixture (the same
// 600-piece vocabulary, another shape and other weights), with the
// fixture's tokenizer.model in it, as a Hugging Face Llama 2 repository
// holds its own.
std::string DraftCheckpointFolder() {
  const std::string dir = TempDir() + "/draft_gqa";
  std::filesystem::create_directories(dir);
  for (const char* f : {"consolidated.00.pth", "params.json"}) {
    std::filesystem::copy_file(CheckpointFixturePath(std::string("gqa_bf16_mp1/") + f), dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::filesystem::copy_file(TokenizerFixturePath("tokenizer.model"), dir + "/tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

// Speculative decoding through the launcher, at 2 ranks: by n-gram lookup,
// by self-speculation (--draft_weights_dtype: the launcher converts the
// checkpoint again for one rank in int8 and hands it to the workers) and by
// another model (--draft_ckpt_dir: converted for one rank, its tokenizer
// checked against the model's first). The job's answers are those without
// it, and the launcher's closing line counts the guesses.
TEST(LauncherTest, SpeculationKeepsTheGoldenOutputAndIsReported) {
  const std::vector<std::pair<std::string, std::string>> sources = {
      {"speculative_ngram", "--speculative_ngram"},
      {"speculative_draft", "--draft_weights_dtype=int8"},
      {"speculative_draft_model", "--draft_ckpt_dir=" + DraftCheckpointFolder()}};
  for (const auto& [name, source] : sources) {
    std::vector<std::string> flags = FixtureJob(name, 2);
    flags.insert(flags.end(), {source, "--speculation_priced=false"});
    LauncherRun run = Launch(name, flags);
    absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
    ASSERT_TRUE(exit.ok());
    ASSERT_TRUE(exit->success()) << run.err();
    ExpectGoldenOutput(TempDir() + "/" + name + "/out.jsonl");
    EXPECT_THAT(run.err(), ::testing::ContainsRegex("[0-9]+ of [1-9][0-9]* speculative guesses kept")) << source;
  }
  // One source at a time; a draft smaller than the model; a draft that
  // speaks another vocabulary, refused before anything is converted.
  std::vector<std::string> both = FixtureJob("speculative_both", 1);
  both.insert(both.end(), {"--draft_weights_dtype=q4_k", "--speculative_ngram"});
  LauncherRun refused = Launch("speculative_both", both);
  EXPECT_EQ(ExitCodeOf(refused, 60s), 2);
  EXPECT_THAT(refused.err(), HasSubstr("give one source of speculative guesses"));
  std::vector<std::string> bigger = FixtureJob("speculative_bf16", 1);
  bigger.push_back("--draft_weights_dtype=bf16");
  LauncherRun bf16 = Launch("speculative_bf16", bigger);
  EXPECT_EQ(ExitCodeOf(bf16, 60s), 2);
  EXPECT_THAT(bf16.err(), HasSubstr("--draft_weights_dtype=bf16: expected q4_k or int8"));
  const std::string llama3 = CheckpointFixturePath("llama3_bf16_mp1");
  std::vector<std::string> other = FixtureJob("speculative_other_vocabulary", 1);
  other.push_back("--draft_ckpt_dir=" + llama3);
  LauncherRun vocabulary = Launch("speculative_other_vocabulary", other);
  EXPECT_EQ(ExitCodeOf(vocabulary, 60s), 2);
  EXPECT_THAT(vocabulary.err(), HasSubstr("--draft_ckpt_dir=" + llama3 + ": the draft's vocabulary has "));
  EXPECT_THAT(vocabulary.err(), Not(HasSubstr("converted to")));
}

// download.sh's layout (tokenizer.model beside the model folder), with the
// folder named as Meta's README and tab completion write it ("llama-2-7b/")
// and as "." from inside it: the tokenizer is found either way.
TEST(LauncherTest, CheckpointFolderWithATrailingSlashOrDot) {
  const std::string root = TempDir() + "/download_layout";
  std::filesystem::create_directories(root + "/tiny");
  for (const char* f : {"consolidated.00.pth", "params.json"}) {
    std::filesystem::copy_file(CheckpointFixturePath(std::string("tiny_fp32_mp1/") + f), root + "/tiny/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::filesystem::copy_file(TokenizerFixturePath("tokenizer.model"), root + "/tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  // "<folder>/." takes the path "." takes from inside the folder.
  for (const std::string& ckpt_dir : {root + "/tiny/", root + "/tiny/."}) {
    const std::string name = absl::EndsWith(ckpt_dir, ".") ? "ckpt_dot" : "ckpt_slash";
    LauncherRun run = Launch(name, {"--ckpt_dir=" + ckpt_dir, absl::StrCat("--shard_dir=", TempDir(), "/shards_", name),
                                    absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"),
                                    "--prompt=I believe the meaning of life is", "--temperature=0", "--max_gen_len=4",
                                    "--max_seq_len=128"});
    EXPECT_EQ(ExitCodeOf(run, 120s), 0) << ckpt_dir << ": " << run.err();
    EXPECT_THAT(run.out(), HasSubstr("I believe the meaning of life is")) << ckpt_dir;
  }
}

// Shards are found up to date by their index; their bytes are checked as
// each rank loads them, so a byte changed since conversion stops the job
// with the file and tensor named, instead of running a wrong model.
TEST(LauncherTest, AShardChangedSinceConversionIsRefused) {
  std::vector<std::string> args = FixtureJob("changed_shard", 1);
  const std::string shard_dir = TempDir() + "/shards_changed";
  for (std::string& arg : args) {
    if (absl::StartsWith(arg, "--shard_dir=")) arg = "--shard_dir=" + shard_dir;
  }
  LauncherRun first = Launch("changed_shard", args);
  ASSERT_EQ(ExitCodeOf(first, 120s), 0) << first.err();

  const std::string shard = shard_dir + "/" + ShardFileName(0, 1);
  int64_t offset = 0;
  {
    absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(shard);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const auto& tensors = (*reader)->index().tensors();
    offset = tensors[tensors.size() - 1].offset() + 3;
  }
  std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  const char byte = static_cast<char>(file.get() ^ 0x40);
  file.seekp(offset);
  file.put(byte);
  file.close();

  LauncherRun second = Launch("changed_shard_again", args);
  EXPECT_EQ(ExitCodeOf(second, 120s), 1);
  EXPECT_THAT(second.err(), HasSubstr("launcher: shards up to date in"));
  EXPECT_THAT(second.err(), HasSubstr("fails its checksum"));
  EXPECT_THAT(second.err(), HasSubstr("re-run //tools:convert"));
}

// A 2-worker job long enough to interrupt, once both workers are
// generating (readiness, not a guess: so the fault tests test the fault).
struct LongJob {
  LauncherRun run;
  std::vector<pid_t> workers;
};

LongJob StartGenerating(const std::string& name) {
  std::vector<std::string> args = FixtureJob(name, 2);
  args.push_back("--max_seq_len=4096");
  args.push_back("--max_gen_len=4000");
  LongJob job{Launch(name, args), {}};
  const std::string log = TempDir() + "/" + name + "/logs/rank0.log";
  const auto deadline = std::chrono::steady_clock::now() + 60s;  // Generous: CI machines are loaded.
  while (std::chrono::steady_clock::now() < deadline &&
         (job.workers.size() < 2 || ReadFileOrEmpty(log).find("generating") == std::string::npos)) {
    std::this_thread::sleep_for(10ms);
    job.workers = ChildrenOf(job.run.process->pid());
  }
  EXPECT_EQ(job.workers.size(), 2u);
  EXPECT_THAT(ReadFileOrEmpty(log), HasSubstr("generating")) << "rank 0 never started generating";
  return job;
}

TEST(LauncherFaultTest, KilledWorkerStopsTheJob) {
  auto [run, workers] = StartGenerating("killed");
  ASSERT_EQ(workers.size(), 2u);
  const pid_t victim = workers[1];
  ::kill(victim, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  EXPECT_EQ(exit->code, 1);
  EXPECT_THAT(run.err(), HasSubstr("failed ("));
  EXPECT_THAT(run.err(), HasSubstr("its log: "));
  EXPECT_TRUE(AllGone(workers)) << "a worker outlived the launcher";
}

TEST(LauncherFaultTest, SigtermStopsEveryWorker) {
  auto [run, workers] = StartGenerating("sigterm");
  ASSERT_EQ(workers.size(), 2u);
  ::kill(run.process->pid(), SIGTERM);
  absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 130);
  EXPECT_THAT(run.err(), HasSubstr("interrupted"));
  EXPECT_TRUE(AllGone(workers));
}

struct BadLaunch {
  std::string name;
  std::vector<std::string> extra;
  std::string model;
  int code;  // 2: the input is wrong; 1: the run failed (base/exit_code.h).
  const char* expected;
  std::vector<std::string> env = {};
  bool before_any_work = true;  // Refused before converting or starting a worker.
};

class LauncherErrorTest : public ::testing::TestWithParam<BadLaunch> {};

TEST_P(LauncherErrorTest, OneClearLine) {
  const BadLaunch& bad = GetParam();
  std::vector<std::string> args = FixtureJob(bad.name, 1, bad.model);
  const std::string shard_dir = absl::StrCat(TempDir(), "/error_shards_", bad.name);
  args.push_back("--shard_dir=" + shard_dir);
  args.insert(args.end(), bad.extra.begin(), bad.extra.end());
  LauncherRun run = Launch(bad.name, args, bad.env);
  absl::StatusOr<ExitStatus> exit = run.process->Wait(60s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, bad.code) << run.err();
  std::string last_line = run.err();
  while (!last_line.empty() && last_line.back() == '\n') last_line.pop_back();
  last_line = last_line.substr(last_line.rfind('\n') + 1);
  EXPECT_THAT(last_line, HasSubstr("launcher: "));
  EXPECT_THAT(last_line, HasSubstr(bad.expected));
  if (bad.before_any_work) {
    EXPECT_FALSE(std::filesystem::exists(shard_dir)) << "converted before refusing";
    EXPECT_FALSE(std::filesystem::exists(shard_dir + ".partial")) << "converted before refusing";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LauncherErrorTest,
    ::testing::Values(BadLaunch{"no_worker", {"--worker=/nonexistent/worker"}, "tiny_fp32_mp1", 2,
                                "cannot run \"/nonexistent/worker\"", {}, /*before_any_work=*/false},
                      // A damaged checkpoint is DataLoss, 1 (base/exit_code.h says why).
                      BadLaunch{"checklist", {}, "broken/bad_checksum", 1,
                                "consolidated.00.pth is corrupt or truncated"},
                      BadLaunch{"split", {"--nproc_per_node=3"}, "tiny_fp32_mp1", 2,
                                "--nproc_per_node=3 x --nnodes=1: world size 3 does not divide n_heads (4)"},
                      // Found by the worker: the launcher's line ends with its error
                      // (a rank that failed is 1, whatever it found).
                      BadLaunch{"worker_error", {"--kv_cache_gb=100000"}, "tiny_fp32_mp1", 1,
                                "rank 0 failed (exit code 1): the weights (0.00 GB), the KV cache (100000.00 GB", {},
                                /*before_any_work=*/false},
                      BadLaunch{"no_ckpt", {"--ckpt_dir=/nonexistent/llama-2-7b"}, "tiny_fp32_mp1", 2,
                                "--ckpt_dir \"/nonexistent/llama-2-7b\" does not exist"},
                      BadLaunch{"no_tokenizer", {"--tokenizer_path=/nonexistent/tokenizer.model"}, "tiny_fp32_mp1", 2,
                                "tokenizer model \"/nonexistent/tokenizer.model\": no such file (--tokenizer_path)"},
                      BadLaunch{"bad_tokenizer", {"--tokenizer_path=/etc/hostname"}, "tiny_fp32_mp1", 2,
                                "is neither a SentencePiece model"},
                      BadLaunch{"bad_weights_dtype", {"--weights_dtype=int4"}, "tiny_fp32_mp1", 2,
                                "--weights_dtype=\"int4\": expected bf16, fp16, fp32, int8 or q4_k"},
                      BadLaunch{"unresolvable_master", {"--master_addr=no-such-host.invalid"}, "tiny_fp32_mp1", 2,
                                "--master_addr=no-such-host.invalid: cannot resolve host \"no-such-host.invalid\""},
                      BadLaunch{"two_inputs", {"--prompt=hi"}, "tiny_fp32_mp1", 2,
                                "give exactly one of --prompt, --prompts_file, --dialogs_file (2 given)"},
                      BadLaunch{"bad_prompts", {"--prompts_file=/etc/hostname"}, "tiny_fp32_mp1", 2, "/etc/hostname"},
                      // Checks that need no weights, before converting (#33).
                      BadLaunch{"tokenizer_vocab", {}, "llama3_bf16_mp1", 2,
                                "has 600 tokens but the model in "},
                      BadLaunch{"prompts_too_long", {"--max_seq_len=2", "--max_gen_len=1"}, "tiny_fp32_mp1", 2,
                                ": nothing can run: prompt 0 has "},
                      BadLaunch{"log_dir", {"--log_dir=/etc/hostname/logs"}, "tiny_fp32_mp1", 2,
                                "--log_dir: cannot create \"/etc/hostname/logs\""},
                      BadLaunch{"no_output_folder", {"--output=/nonexistent/out.jsonl"}, "tiny_fp32_mp1", 2,
                                "--output \"/nonexistent/out.jsonl\": the folder /nonexistent does not exist"},
                      BadLaunch{"token_file", {"--token_file=/nonexistent/token"}, "tiny_fp32_mp1", 2,
                                "--token_file \"/nonexistent/token\": missing or empty"},
                      BadLaunch{"bad_device", {"--device=tpu"}, "tiny_fp32_mp1", 2, "--device=\"tpu\""},
                      BadLaunch{"bad_kv_cache_dtype", {"--kv_cache_dtype=int8"}, "tiny_fp32_mp1", 2,
                                "--kv_cache_dtype=\"int8\": expected f32, bf16 or f16"},
                      BadLaunch{"max_gen_len", {"--max_gen_len=-2"}, "tiny_fp32_mp1", 2,
                                "--max_gen_len=-2: expected -1 (max_seq_len - 1) or a count >= 0"},
                      BadLaunch{"nan_weight", {}, "broken/nan_weight", 1,
                                "tensor \"layers.1.feed_forward.w2.weight\": element 581 of the shard's part is "
                                "NaN or infinite"},
                      // One visible GPU, whatever this machine has; a build
                      // without CUDA refuses --device=cuda before counting.
                      BadLaunch{"gpus", {"--device=cuda", "--nproc_per_node=2"}, "tiny_fp32_mp1", 2,
                                BuiltWithCuda() ? "--nproc_per_node=2 needs 2 GPUs on this node; 1 visible"
                                                : "--device=cuda: this binary was built without CUDA",
                                {"CUDA_VISIBLE_DEVICES=0"}}),
    [](const ::testing::TestParamInfo<BadLaunch>& info) { return info.param.name; });

// A dialog the chat format refuses is found before converting, in the
// worker's words; one prompt of several that is too long is a warning
// before converting, and the others run.
TEST(LauncherTest, DialogRolesAndPromptLengthsAreCheckedBeforeConverting) {
  std::vector<std::string> args = FixtureJob("bad_roles", 1);
  const std::string shard_dir = TempDir() + "/shards_bad_roles";
  const std::string dialogs = TempDir() + "/bad_roles.json";
  std::ofstream(dialogs) << R"([[{"role": "assistant", "content": "I speak first"}]])";
  args.insert(args.end(), {"--shard_dir=" + shard_dir, "--prompts_file=", "--dialogs_file=" + dialogs});
  LauncherRun run = Launch("bad_roles", args);
  EXPECT_EQ(ExitCodeOf(run, 60s), 2);
  EXPECT_THAT(run.err(), HasSubstr(": nothing can run: dialog 0: dialog message 0 has role \"assistant\""));
  EXPECT_FALSE(std::filesystem::exists(shard_dir)) << "converted before refusing";

  const std::string prompts = TempDir() + "/one_long.json";
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += "I believe the meaning of life is ";
  std::ofstream(prompts) << nlohmann::json({"Hi", long_prompt}).dump();
  args = FixtureJob("one_long", 1);
  args.insert(args.end(), {"--shard_dir=" + TempDir() + "/shards_one_long", "--prompts_file=" + prompts,
                           "--max_seq_len=16", "--max_gen_len=2"});
  LauncherRun mixed = Launch("one_long", args);
  EXPECT_EQ(ExitCodeOf(mixed, 120s), 1);  // One failed prompt: the job ran, so not 2.
  const std::string err = mixed.err();
  const size_t warning = err.find("prompt 1 has ");
  ASSERT_NE(warning, std::string::npos) << err;
  const size_t converted = err.find("launcher: converted to");
  ASSERT_NE(converted, std::string::npos) << err;
  EXPECT_LT(warning, converted) << "warned only after converting";
}

TEST(LauncherFaultTest, BusyMasterPort) {
  absl::StatusOr<net::Socket> squatter = net::Listen("0.0.0.0", 0);
  const int port = *net::LocalPort(*squatter);
  std::vector<std::string> args = FixtureJob("busy", 1);
  args.push_back(absl::StrCat("--master_port=", port));
  LauncherRun run = Launch("busy", args);
  absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT(run.err(), HasSubstr(absl::StrCat("--master_port=", port, " is already in use")));
}

TEST(LauncherFaultTest, DownloadNeedsATargetAndAUrl) {
  LauncherRun no_target = Launch("dl_no_target", {"download", "--models=7B"});
  EXPECT_EQ(ExitCodeOf(no_target), 2) << no_target.err();
  EXPECT_THAT(no_target.err(), HasSubstr("download: --target_dir is required"));
  LauncherRun no_url = Launch("dl_no_url", {"download", "--models=7B", "--target_dir=" + TempDir() + "/dl"});
  absl::StatusOr<ExitStatus> exit = no_url.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT(no_url.err(), HasSubstr("no presigned URL"));
}

// Two launchers as two nodes of one job, started together on a checkpoint
// with no shards yet in the folder they share: node 0 converts while node 1
// waits for it (they used to both convert and collide), and the tokens are
// those of one launcher with 2 workers. Logs are outside the shard folder.
struct TwoNodes {
  net::Socket reserved_port;  // Held until node 0's launcher has taken the port over.
  std::vector<LauncherRun> nodes;
};

TwoNodes LaunchTwoNodes(const std::string& name, const std::string& model, const std::vector<std::string>& extra = {},
                        bool shared = true) {
  // Both nodes need the port before either starts.
  absl::StatusOr<net::Socket> reserved = net::ReservePort();
  EXPECT_TRUE(reserved.ok()) << reserved.status();
  const int port = *net::LocalPort(*reserved);
  std::vector<LauncherRun> nodes;
  for (int node = 0; node < 2; ++node) {
    const std::string node_name = absl::StrCat(name, "_node", node);
    std::vector<std::string> args = FixtureJob(node_name, 1, model);
    args.push_back("--nnodes=2");
    args.push_back(absl::StrCat("--node_rank=", node));
    args.push_back("--master_addr=127.0.0.1");
    args.push_back(absl::StrCat("--master_port=", port));
    args.push_back(absl::StrCat("--shard_dir=", TempDir(), "/shards_", name, shared ? "" : absl::StrCat("_", node)));
    args.push_back("--rendezvous_timeout=60");
    args.insert(args.end(), extra.begin(), extra.end());
    nodes.push_back(Launch(node_name, args, {"RENDEZVOUS_TOKEN=shared-secret"}));
  }
  return {*std::move(reserved), std::move(nodes)};
}

TEST(LauncherMultiNodeTest, TwoNodesShareOneConversion) {
  auto [reserved_port, nodes] = LaunchTwoNodes("two_nodes", "tiny_fp32_mp1");
  for (LauncherRun& run : nodes) {
    absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
    ASSERT_TRUE(exit.ok());
    EXPECT_TRUE(exit->success()) << run.err();
  }
  ExpectGoldenOutput(TempDir() + "/two_nodes_node0/out.jsonl");
  EXPECT_FALSE(std::filesystem::exists(TempDir() + "/two_nodes_node1/out.jsonl"));  // Only rank 0 writes.
  EXPECT_THAT(nodes[0].err(), Not(HasSubstr("waiting for node 0")));
  // The shard folder holds shards only.
  for (const auto& entry : std::filesystem::directory_iterator(TempDir() + "/shards_two_nodes")) {
    EXPECT_EQ(entry.path().extension(), ".shard") << entry.path();
  }
}

// Nodes without shared storage each convert their own copy.
TEST(LauncherMultiNodeTest, NodeLocalShards) {
  auto [reserved_port, nodes] = LaunchTwoNodes("local_shards", "tiny_fp32_mp1", {"--node_local_shards"},
                                                  /*shared=*/false);
  for (LauncherRun& run : nodes) {
    absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
    ASSERT_TRUE(exit.ok());
    EXPECT_TRUE(exit->success()) << run.err();
  }
  ExpectGoldenOutput(TempDir() + "/local_shards_node0/out.jsonl");
}

// Node 0 cannot convert (6 ranks do not divide the model's 4 heads, which
// only the conversion finds out): node 1 stops at once with node 0's reason
// instead of waiting out its deadline. Node 0 found the wrong input (2);
// node 1 reports another node's failure (1).
TEST(LauncherMultiNodeTest, ANodeStopsWhenNodeZerosConversionFailed) {
  const auto start = std::chrono::steady_clock::now();
  auto [reserved_port, nodes] = LaunchTwoNodes("failed_conversion", "tiny_fp32_mp1", {"--nproc_per_node=3"});
  for (size_t node = 0; node < nodes.size(); ++node) {
    absl::StatusOr<ExitStatus> exit = nodes[node].process->Wait(60s);
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->code, node == 0 ? 2 : 1) << nodes[node].err();
  }
  const char* reason = "--nproc_per_node=3 x --nnodes=2: world size 6 does not divide n_heads (4)";
  EXPECT_THAT(nodes[0].err(), HasSubstr(reason));
  EXPECT_THAT(nodes[1].err(), HasSubstr(absl::StrCat("node 0 could not convert the checkpoint: ", reason)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 40s);  // Its deadline is 60 s.
}

TEST(LauncherMultiNodeTest, NodesWithoutASharedTokenAreRefused) {
  std::vector<std::string> args = FixtureJob("no_token", 1);
  args.push_back("--nnodes=2");
  LauncherRun run = Launch("no_token", args);
  absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT(run.err(), HasSubstr("set RENDEZVOUS_TOKEN or --token_file"));
}

// Inside an srun step, SLURM's variables place the launcher.
TEST(LauncherSlurmTest, SrunPlacement) {
  // A job id of our own, so concurrent test runs get different derived ports.
  LauncherRun run = Launch("slurm", FixtureJob("slurm", 2),
                   {absl::StrCat("SLURM_JOB_ID=", 1000 + getpid() % 25000), "SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NNODES=1",
                    "SLURM_JOB_NODELIST=localhost", "RENDEZVOUS_TOKEN=slurm-secret"});
  absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
  ASSERT_TRUE(exit.ok());
  EXPECT_TRUE(exit->success()) << run.err();
  ExpectGoldenOutput(TempDir() + "/slurm/out.jsonl");
  EXPECT_THAT(ReadFileOrEmpty(TempDir() + "/slurm/logs/rank0.log"), HasSubstr("rank 0 of 2"));
}

// A folder on "shared storage" with a launcher and the worker beside it
// (both checked at submission, neither run).
std::string FakeSharedLauncher() {
  const std::string shared = TempDir() + "/shared tools";
  std::filesystem::create_directories(shared);
  for (const char* binary : {"/launcher", "/worker"}) {
    std::ofstream(shared + binary) << "#!/bin/sh\n";
    chmod((shared + binary).c_str(), 0755);
  }
  return shared + "/launcher";
}

TEST(LauncherSlurmTest, SbatchWritesAndSubmitsTheScript) {
  const std::string bin = TempDir() + "/fakebin";
  std::filesystem::create_directories(bin);
  const std::string submitted = TempDir() + "/submitted.sh";
  // The fake sbatch keeps a copy of the script and says where it read it.
  // --parsable: it prints the job id alone.
  std::ofstream(bin + "/sbatch") << "#!/bin/sh\nfor a; do f=\"$a\"; done\ncp \"$f\" " << submitted
                                 << "\necho \"$f\" > " << submitted << ".path\necho 42\n";
  chmod((bin + "/sbatch").c_str(), 0755);
  const std::string launcher = FakeSharedLauncher();
  const std::string shared = std::filesystem::path(launcher).parent_path().string();
  // Job flags before "--" are passed on as well as those after it. The
  // checkpoint is checked at submission (a 4-head model: 2 nodes x 4 GPUs
  // would not divide it; 2 x 2 does).
  const std::string ckpt = CheckpointFixturePath("tiny_fp32_mp1");
  const std::string tokenizer = TokenizerFixturePath("tokenizer.model");
  LauncherRun run = Launch("sbatch", {"sbatch", "--nodes=2", "--gpus_per_node=2", "--partition=gpu",
                                      "--launcher_path=" + launcher, "--max_gen_len=64", "--",
                                      "--ckpt_dir=" + ckpt, "--tokenizer_path=" + tokenizer, "--prompt=hello"},
                           {"PATH=" + bin + ":/usr/bin:/bin"});
  absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_TRUE(exit->success()) << run.err();
  const std::string script = ReadFileOrEmpty(submitted);
  EXPECT_THAT(script, HasSubstr("#SBATCH --nodes=2"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --gpus-per-node=2"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --exclusive"));
  EXPECT_THAT(script, HasSubstr("srun --ntasks-per-node=1 --kill-on-bad-exit=1 --label '" + shared +
                                "/launcher' --nproc_per_node=2 "));
  EXPECT_THAT(script, HasSubstr("'--ckpt_dir=" + ckpt + "'"));
  EXPECT_THAT(script, HasSubstr("'--prompt=hello'"));
  EXPECT_THAT(script, HasSubstr("'--max_gen_len=64'"));
  // The job id alone on the last line, for scripts.
  EXPECT_THAT(run.out(), EndsWith("\n42\n"));
  EXPECT_THAT(run.err(), HasSubstr("submitted batch job 42"));
  // Submitted from a private file, gone afterwards.
  std::string path = ReadFileOrEmpty(submitted + ".path");
  while (!path.empty() && path.back() == '\n') path.pop_back();
  EXPECT_THAT(path, Not(HasSubstr(absl::StrCat(run.process->pid()))));
  EXPECT_FALSE(path.empty());
  EXPECT_FALSE(std::filesystem::exists(path)) << path;

  // Without "--", what used to run the demo: the flags reach the script.
  LauncherRun dry = Launch("sbatch_dry", {"sbatch", "--dry_run", "--nodes=1", "--launcher_path=/opt/l/launcher",
                                          "--ckpt_dir=/x", "--prompt=p"},
                           {"PATH=/nonexistent"});
  EXPECT_EQ(ExitCodeOf(dry), 0) << dry.err();
  EXPECT_THAT(dry.out(), HasSubstr("#!/bin/bash"));
  EXPECT_THAT(dry.out(), HasSubstr("'--ckpt_dir=/x'"));
  EXPECT_THAT(dry.out(), HasSubstr("'--prompt=p'"));

  // A dry run checks flags only: every path may be the cluster's, absent
  // here (a real submission checks them: SbatchRefusesWhatCannotWork).
  LauncherRun cluster_paths =
      Launch("sbatch_dry_paths", {"sbatch", "--dry_run", "--launcher_path=/opt/l/launcher", "--",
                                  "--ckpt_dir=/data/llama-2-70b", "--tokenizer_path=/data/tokenizer.model",
                                  "--prompts_file=/data/prompts.json", "--json_schema=/data/schema.json"},
             {"PATH=/nonexistent"});
  EXPECT_EQ(ExitCodeOf(cluster_paths), 0) << cluster_paths.err();
  EXPECT_THAT(cluster_paths.out(), HasSubstr("'--tokenizer_path=/data/tokenizer.model'"));
  EXPECT_THAT(cluster_paths.out(), HasSubstr("'--json_schema=/data/schema.json'"));
}

// Each refusal is one line, and no script is printed or submitted.
// A server under SLURM: `launcher sbatch ... -- serve ...` runs `launcher
// serve` on every node with the serving flags.
TEST(LauncherSlurmTest, SbatchServesToo) {
  LauncherRun run = Launch("sbatch_serve", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--nodes=2", "--",
                                            "serve", "--host=0.0.0.0", "--port=9000", "--ckpt_dir=/data/llama-2-70b"},
                           {"PATH=/nonexistent"});
  ASSERT_EQ(ExitCodeOf(run), 0) << run.err();
  EXPECT_THAT(run.out(), HasSubstr(" 'serve' "));
  EXPECT_THAT(run.out(), HasSubstr("--port=9000"));
  EXPECT_THAT(run.out(), HasSubstr("--host=0.0.0.0"));
}

// Repeatable flags: every --worker_env (before or after "--") reaches the
// job's launchers, every --sbatch_arg its own #SBATCH line; no GPU request
// unless asked; --log_dir (glog's, listed by --help) is a job flag too.
TEST(LauncherSlurmTest, SbatchRepeatableFlagsAndCpuNodes) {
  LauncherRun run = Launch("sbatch_repeat", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--nodes=2",
                                             "--nproc_per_node=3", "--worker_env=A=1", "--sbatch_arg=--qos=high",
                                             "--sbatch_arg=--mem=0", "--", "--worker_env=B=2",
                                             "--log_dir=/shared/logs"},
                           {"PATH=/nonexistent"});
  ASSERT_EQ(ExitCodeOf(run), 0) << run.err();
  EXPECT_THAT(run.out(), HasSubstr("#SBATCH --qos=high\n#SBATCH --mem=0\n"));
  EXPECT_THAT(run.out(), HasSubstr("--nproc_per_node=3 --master_addr=\"${node0_addr:-$node0}\" "
                                   "'--log_dir=/shared/logs' '--worker_env=A=1' '--worker_env=B=2'\n"));
  EXPECT_THAT(run.out(), Not(HasSubstr("gpus-per-node")));
}

TEST(LauncherSlurmTest, SbatchRefusesWhatCannotWork) {
  // What the nodes would refuse after the queue wait, refused at
  // submission with a local run's message.
  const std::string shared = "--launcher_path=" + FakeSharedLauncher();
  const std::string ckpt = "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1");
  const std::string tokenizer = "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model");
  const struct {
    const char* name;
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {"no_checkpoint", {"sbatch", shared, "--", "--ckpt_dir=/nonexistent", "--prompt=hi"},
       "--ckpt_dir \"/nonexistent\" does not exist"},
      {"no_input", {"sbatch", shared, "--", ckpt, tokenizer}, "give exactly one of --prompt"},
      {"int4", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", ckpt, "--prompt=hi", "--weights_dtype=int4"},
       "--weights_dtype=\"int4\""},
      {"heads", {"sbatch", shared, "--nodes=2", "--nproc_per_node=3", "--", ckpt, tokenizer, "--prompt=hi"},
       "--nodes=2 x 3 worker(s) per node: world size 6 does not divide n_heads (4)"},
      {"tokenizer", {"sbatch", shared, "--", ckpt, "--tokenizer_path=/nonexistent.model", "--prompt=hi"},
       "--tokenizer_path=/nonexistent.model: no such file"},
      {"bazel_path", {"sbatch", "--dry_run", "--", "--ckpt_dir=/x"}, "runs from Bazel's output tree"},
      {"nnodes", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--nnodes=2"}, "--nnodes is decided by SLURM"},
      {"master_addr", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", "--master_addr=h"},
       "--master_addr is decided by SLURM"},
      {"no_launcher", {"sbatch", "--launcher_path=/nonexistent/launcher", "--", "--ckpt_dir=/x"},
       "--launcher_path=/nonexistent/launcher: no such executable"},
      {"prompts_file", {"sbatch", shared, "--", ckpt, tokenizer, "--prompts_file=/nonexistent.txt"},
       "--prompts_file=/nonexistent.txt: no such file"},
      {"serve_prompt", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", "serve", "--prompt=hi"},
       "serve takes its prompts over HTTP"},
      {"unknown", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", "--tempreature=0"},
       "unknown job flag --tempreature"},
      {"bad_value", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", "--max_gen_len=-5"},
       "--max_gen_len=-5: expected -1"},
      {"api_key", {"sbatch", "--dry_run", "--launcher_path=/opt/l", "--", "serve", "--api_key=s3cret"},
       "--api_key would be written into the batch script"},
  };
  for (const auto& c : cases) {
    LauncherRun run = Launch(absl::StrCat("sbatch_", c.name), c.args, {"PATH=/nonexistent"});
    absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
    ASSERT_TRUE(exit.ok()) << c.name;
    EXPECT_EQ(exit->code, 2) << c.name;
    EXPECT_THAT(run.err(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(run.out(), Not(HasSubstr("#!/bin/bash"))) << c.name;
  }
}

// --help is the manual: the launcher's and the worker's flags grouped, the
// defaults as written, no logging-library flags but --log_dir, exit 0;
// --version names the build.

TEST(LauncherHelpTest, HelpAndVersion) {
  for (const char* binary : {"launcher/launcher", "worker/worker"}) {
    for (const char* ask : {"--help", "-h", "--helpshort"}) {
      LauncherRun run = RunProgram("help", {binary, ask}, {});
      absl::StatusOr<ExitStatus> exit = run.process->Wait(30s);
      ASSERT_TRUE(exit.ok()) << binary << " " << ask;
      EXPECT_EQ(exit->code, 0) << binary << " " << ask;
      const std::string out = run.out();
      EXPECT_THAT(out, HasSubstr("Generation:\n")) << binary;
      EXPECT_THAT(out, HasSubstr("--temperature  (double, default 0.6)")) << binary;
      EXPECT_THAT(out, HasSubstr("--top_p  (double, default 0.9)")) << binary;
      EXPECT_THAT(out, HasSubstr("--log_dir")) << binary;
      for (const char* library : {"--logtostderr", "--minloglevel", "--stderrthreshold", "--flagfile", "0.59999"}) {
        EXPECT_THAT(out, Not(HasSubstr(library))) << binary << " " << library;
      }
    }
  }
  LauncherRun version = RunProgram("version", {"launcher/launcher", "--version"}, {});
  EXPECT_EQ(ExitCodeOf(version), 0) << version.err();
  EXPECT_THAT(version.out(), HasSubstr("launcher (llama2-cpp "));
  EXPECT_THAT(version.out(), HasSubstr("commit "));
  EXPECT_THAT(version.out(), HasSubstr("CPU kernels: "));
}

// A flag gflags refuses is a wrong input like any other: 2, not gflags' 1.
TEST(LauncherHelpTest, ARefusedFlagExits2) {
  const std::pair<const char*, const char*> refused[] = {{"--no_such_flag", "unknown command line flag"},
                                                         {"--max_gen_len=many", "illegal value 'many'"}};
  int runs = 0;
  for (const char* binary : {"launcher/launcher", "worker/worker"}) {
    for (const auto& [flag, said] : refused) {
      LauncherRun run = RunProgram(absl::StrCat("refused_flag_", runs++), {binary, flag}, {});
      EXPECT_EQ(ExitCodeOf(run), 2) << binary << " " << flag << ": " << run.err();
      EXPECT_THAT(run.err(), HasSubstr(said)) << binary;
    }
  }
}

// A subcommand's --help says what it does first and lists only its flags.
TEST(LauncherHelpTest, SubcommandHelpIsItsOwn) {
  struct Case {
    const char* command;
    const char* first_line_start;
    std::vector<const char*> has;
    std::vector<const char*> lacks;
  };
  const Case cases[] = {
      {"serve", "launcher serve: serves the OpenAI API", {"--port", "--ckpt_dir", "--max_batch_size"},
       {"--prompts_file", "--system_prompt", "--models", "--partition"}},
      {"chat", "launcher chat: chats with the model", {"--system_prompt", "--temperature", "--ckpt_dir"},
       {"--prompts_file", "--port", "--models", "--partition"}},
      {"download", "launcher download: downloads Meta's checkpoints", {"--models", "--target_dir"},
       {"--ckpt_dir", "--temperature", "--port"}},
      {"sbatch", "launcher sbatch: writes the Slurm batch script", {"--partition", "--ckpt_dir", "--prompt"},
       {"--system_prompt", "--models", "--port "}},
  };
  for (const Case& c : cases) {
    LauncherRun run = RunProgram(absl::StrCat("help_", c.command), {"launcher/launcher", c.command, "--help"}, {});
    EXPECT_EQ(ExitCodeOf(run), 0) << c.command;
    const std::string out = run.out();
    EXPECT_TRUE(absl::StartsWith(out, c.first_line_start)) << out.substr(0, 200);
    for (const char* flag : c.has) EXPECT_THAT(out, HasSubstr(flag)) << c.command;
    for (const char* flag : c.lacks) EXPECT_THAT(out, Not(HasSubstr(flag))) << c.command;
    EXPECT_LT(std::count(out.begin(), out.end(), '\n'), 150) << c.command;
  }
}

// The README's first command: the demo job, with no checkpoint at all.
TEST(LauncherDemoTest, DemoJobRunsOnAFreshMachine) {
  LauncherRun run = Launch("demo_run", {"--demo_dir=" + TempDir() + "/demo_cache"});
  absl::StatusOr<ExitStatus> exit = run.process->Wait(120s);
  ASSERT_TRUE(exit.ok());
  EXPECT_TRUE(exit->success()) << run.err();
  EXPECT_THAT(run.err(), HasSubstr("RANDOM weights"));
  EXPECT_THAT(run.err(), HasSubstr("launcher: 2 rank(s) on 1 node(s) done"));
  EXPECT_THAT(run.err(), HasSubstr("launcher: 4/4 prompts done, "));  // Rank 0's progress.
  // One voice: no library's log lines (SentencePiece's trainer, glog's
  // "I1130 15:27:36.46 ..." lines) in what the user sees.
  for (absl::string_view line : absl::StrSplit(run.err(), '\n')) {
    EXPECT_THAT(line, Not(HasSubstr("LOG(INFO)"))) << line;
    EXPECT_FALSE(line.size() > 5 && (line[0] == 'I' || line[0] == 'W') && absl::ascii_isdigit(line[1]) &&
                 absl::ascii_isdigit(line[2]) && absl::ascii_isdigit(line[3]) && absl::ascii_isdigit(line[4]))
        << line;
  }
  EXPECT_THAT(run.err(), HasSubstr("tokens generated at"));
  EXPECT_THAT(run.out(), HasSubstr("I believe the meaning of life is\n> "));
  EXPECT_THAT(run.out(), HasSubstr("cheese =>\n> "));
}

}  // namespace
}  // namespace llama
