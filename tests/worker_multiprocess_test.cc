// //worker as separate processes on 127.0.0.1: 1, 2 and 4 ranks over the
// TCP collective on fixtures converted to those world sizes, against the
// PyTorch golden text completions, plus the faults a job must survive
// cleanly (a killed rank, a rank that never starts, a busy port).

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <regex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/net.h"
#include "base/process.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "ops/dtype.h"
#include "tests/fixtures/sampled_golden.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::ReadFileOrEmpty;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

std::string TempDir() { return getenv("TEST_TMPDIR"); }

// Shards of fixture `model` for `world_size` ranks (converted once), to
// `dtype` when given.
std::string Shards(const std::string& model, int world_size, std::optional<DType> dtype = std::nullopt) {
  const std::string out = absl::StrCat(TempDir(), "/", model, "_tp", world_size,
                                       dtype.has_value() ? absl::StrCat("_", DTypeName(*dtype)) : "");
  ConvertOptions options;
  options.ckpt_dir = testing::CheckpointFixturePath(model);
  options.out_dir = out;
  options.world_size = world_size;
  options.dtype = dtype;
  absl::StatusOr<ConvertResult> result = ConvertCheckpoint(options);
  EXPECT_TRUE(result.ok()) << result.status();
  return out;
}

const nlohmann::json& Golden(const std::string& model) {
  static std::map<std::string, nlohmann::json>* cache = new std::map<std::string, nlohmann::json>();
  auto it = cache->find(model);
  if (it == cache->end()) {
    std::ifstream in("tests/fixtures/engine_golden/" + model + "/golden.json");
    it = cache->emplace(model, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

struct Job {
  net::Socket store_listener;  // Bound here, as the launcher does, and handed to rank 0.
  std::vector<std::unique_ptr<Process>> ranks;
  std::string dir;
  std::string Log(int rank) const { return ReadFileOrEmpty(absl::StrCat(dir, "/rank", rank, ".err")); }
  std::string Stdout(int rank) const { return ReadFileOrEmpty(absl::StrCat(dir, "/rank", rank, ".out")); }
};

// Starts ranks `which` of a `world_size` job (all if empty).
Job Start(const std::string& name, const std::string& shard_dir, int world_size, std::vector<std::string> flags,
          std::vector<int> which = {}, int port = 0, const std::vector<std::string>& rank1_flags = {}) {
  Job job;
  job.dir = absl::StrCat(TempDir(), "/", name);
  std::filesystem::create_directories(job.dir);
  if (port == 0) {
    absl::StatusOr<net::Socket> listener = net::Listen("0.0.0.0", 0);
    EXPECT_TRUE(listener.ok()) << listener.status();
    port = *net::LocalPort(*listener);
    job.store_listener = *std::move(listener);
  }
  if (which.empty()) {
    for (int r = 0; r < world_size; ++r) which.push_back(r);
  }
  for (int rank : which) {
    ProcessOptions p;
    p.argv = {"worker/worker", "--shard_dir=" + shard_dir,
              "--tokenizer_path=" + testing::TokenizerFixturePath("tokenizer.model"), "--threads=1",
              "--rendezvous_timeout=5", absl::StrCat("--output=", job.dir, "/out.jsonl")};
    p.argv.insert(p.argv.end(), flags.begin(), flags.end());
    if (rank == 1) p.argv.insert(p.argv.end(), rank1_flags.begin(), rank1_flags.end());
    p.env = {absl::StrCat("RANK=", rank), absl::StrCat("LOCAL_RANK=", rank), absl::StrCat("WORLD_SIZE=", world_size),
             absl::StrCat("LOCAL_WORLD_SIZE=", world_size), "MASTER_ADDR=127.0.0.1",
             absl::StrCat("MASTER_PORT=", port), "RENDEZVOUS_TOKEN=test-token"};
    if (rank == 0 && job.store_listener.valid()) {
      p.inherit_fd = job.store_listener.fd();
      p.env.push_back(absl::StrCat("RENDEZVOUS_LISTEN_FD=", job.store_listener.fd()));
    }
    p.stdout_path = absl::StrCat(job.dir, "/rank", rank, ".out");
    p.stderr_path = absl::StrCat(job.dir, "/rank", rank, ".err");
    absl::StatusOr<std::unique_ptr<Process>> process = Process::Spawn(p);
    EXPECT_TRUE(process.ok()) << process.status();
    job.ranks.push_back(*std::move(process));
  }
  return job;
}

// Waits for every process; all must succeed.
void ExpectSuccess(Job& job) {
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    absl::StatusOr<ExitStatus> exit = job.ranks[i]->Wait(120s);
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_TRUE(exit->success()) << "rank " << i << ": " << exit->Describe() << "\n" << job.Log(i);
  }
}

// Waits for every process; each must exit `code` (2: the input is wrong,
// 1: the run failed): a clear error, not a crash, a signal or a hang.
void ExpectEveryRankFails(Job& job, int code) {
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    absl::StatusOr<ExitStatus> exit = job.ranks[i]->Wait(30s);
    ASSERT_TRUE(exit.ok()) << "rank " << i << ": " << exit.status();
    EXPECT_EQ(exit->code, code) << "rank " << i << ": " << exit->Describe() << "\n" << job.Log(i);
  }
}

// Waits for every rank of a job refused for its input: a rank that found
// the problem (its log says `found`) exits 2; one that lost a peer first
// (the peer's exit took the store with it) exits 1, as any lost peer.
void ExpectRanksRefuse(Job& job, const std::string& found) {
  int finders = 0;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    absl::StatusOr<ExitStatus> exit = job.ranks[i]->Wait(30s);
    ASSERT_TRUE(exit.ok()) << "rank " << i << ": " << exit.status();
    const bool found_it = job.Log(i).find(found) != std::string::npos;
    finders += found_it;
    EXPECT_EQ(exit->code, found_it ? 2 : 1) << "rank " << i << ": " << exit->Describe() << "\n" << job.Log(i);
  }
  EXPECT_GT(finders, 0) << "no rank said: " << found;
}

std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::string WritePrompts(const std::string& model) {
  const std::string path = TempDir() + "/prompts.json";
  nlohmann::json prompts = nlohmann::json::array();
  for (const auto& c : Golden(model)["text_completions"]) prompts.push_back(c["prompt"]);
  std::ofstream(path) << prompts.dump();
  return path;
}

// Llama 3's fixture speaks the test tiktoken vocabulary (a later flag wins).
std::string TokenizerOf(const std::string& model) {
  return absl::StartsWith(model, "llama3") ? "tests/fixtures/tiktoken_fixture/tokenizer.model"
                                           : testing::TokenizerFixturePath("tokenizer.model");
}

// A job's sampled rows against the golden's (tests/fixtures/sampled_golden.h),
// d measured on the log-probs of the tokens they share; returns how many
// tokens agree.
size_t ExpectSampledRows(const std::vector<nlohmann::json>& rows, const nlohmann::json& sampled) {
  EXPECT_EQ(rows.size(), sampled["rows"].size());
  if (rows.size() != sampled["rows"].size()) return 0;
  double d = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    d = std::max(d, testing::LogprobDifference(rows[i]["token_ids"].get<std::vector<int>>(),
                                               rows[i]["logprobs"].get<std::vector<double>>(), sampled["rows"][i]));
  }
  const double close = testing::CloseDraw(d, sampled["temperature"].get<double>());
  size_t agreed = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_TRUE(testing::SampledRowAgrees(rows[i]["token_ids"].get<std::vector<int>>(), sampled["rows"][i], close,
                                          &agreed))
        << "row " << i << " (log-prob difference " << d << ")";
  }
  return agreed;
}

class WorkerMultiProcessTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// Greedy text completion on 1, 2 and 4 ranks equals the PyTorch reference:
// same tokens; log-probabilities within the engine's 1e-4.
TEST_P(WorkerMultiProcessTest, GreedyMatchesPyTorchOnEveryWorldSize) {
  const auto& [model, world_size] = GetParam();
  Job job = Start(absl::StrCat(model, "_greedy_", world_size), Shards(model, world_size), world_size,
                  {"--prompts_file=" + WritePrompts(model), "--temperature=0", "--max_gen_len=32", "--logprobs",
                   "--max_seq_len=128", "--tokenizer_path=" + TokenizerOf(model)});
  ExpectSuccess(job);
  const std::vector<nlohmann::json> rows = ReadJsonl(job.dir + "/out.jsonl");
  const auto& expected = Golden(model)["text_completions"];
  ASSERT_EQ(rows.size(), expected.size()) << job.Log(0);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["token_ids"], expected[i]["token_ids"]) << "prompt " << i;
    const auto lp = rows[i]["logprobs"].get<std::vector<double>>();
    const auto want = expected[i]["logprobs"].get<std::vector<double>>();
    ASSERT_EQ(lp.size(), want.size());
    for (size_t j = 0; j < lp.size(); ++j) EXPECT_NEAR(lp[j], want[j], 1e-4) << "prompt " << i << " token " << j;
  }
  // Rank 0 prints like the reference's example script; the others print nothing.
  EXPECT_THAT(job.Stdout(0), HasSubstr("I believe the meaning of life is\n> "));
  for (int r = 1; r < world_size; ++r) EXPECT_EQ(job.Stdout(r), "") << r;
}

// Sampled text completion on 1, 2 and 4 ranks against PyTorch's logits with
// our documented sampler (tests/fixtures/sampled_golden.h; d is the 1e-4
// the greedy test holds the log-probabilities to).
TEST_P(WorkerMultiProcessTest, SampledMatchesPyTorchOnEveryWorldSize) {
  const auto& [model, world_size] = GetParam();
  const nlohmann::json& sampled = Golden(model)["sampled_text_completions"];
  Job job = Start(absl::StrCat(model, "_sampled_", world_size), Shards(model, world_size), world_size,
                  {"--prompts_file=" + WritePrompts(model), absl::StrCat("--temperature=", sampled["temperature"].get<double>()),
                   absl::StrCat("--top_p=", sampled["top_p"].get<double>()), absl::StrCat("--seed=", sampled["seed"].get<uint64_t>()),
                   absl::StrCat("--max_gen_len=", sampled["max_gen_len"].get<int>()), "--max_seq_len=128",
                   "--logprobs", "--tokenizer_path=" + TokenizerOf(model)});
  ExpectSuccess(job);
  EXPECT_GE(ExpectSampledRows(ReadJsonl(job.dir + "/out.jsonl"), sampled), 40u)
      << "too few agreeing draws to prove anything";
}

// Llama 3's chat format and stop tokens on two ranks: the llama3
// reference's ChatFormat and greedy chat_completion, in PyTorch.
TEST(WorkerChatTest, Llama3ChatMatchesPyTorch) {
  const nlohmann::json& golden = Golden("llama3_bf16_mp1");
  const std::string dialogs = TempDir() + "/llama3_dialogs.json";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : golden["chat_completions"]) list.push_back(c["dialog"]);
  std::ofstream(dialogs) << list.dump();
  Job job = Start("llama3_chat", Shards("llama3_bf16_mp2", 2), 2,
                  {"--dialogs_file=" + dialogs, "--temperature=0", "--max_gen_len=32", "--logprobs",
                   "--max_seq_len=128", "--tokenizer_path=" + TokenizerOf("llama3")});
  ExpectSuccess(job);
  const std::vector<nlohmann::json> rows = ReadJsonl(job.dir + "/out.jsonl");
  ASSERT_EQ(rows.size(), golden["chat_completions"].size()) << job.Log(0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& want = golden["chat_completions"][i];
    EXPECT_EQ(rows[i]["token_ids"], want["token_ids"]) << "dialog " << i;
    EXPECT_EQ(rows[i]["generation"]["role"], "assistant");
    EXPECT_EQ(rows[i]["generation"]["content"], want["content"]) << "dialog " << i;
  }
}

// The same dialogs sampled (Llama 3's chat format, 2 ranks).
TEST(WorkerChatTest, Llama3SampledChatMatchesPyTorch) {
  const nlohmann::json& golden = Golden("llama3_bf16_mp1");
  const nlohmann::json& sampled = golden["sampled_chat_completions"];
  const std::string dialogs = TempDir() + "/llama3_sampled_dialogs.json";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : golden["chat_completions"]) list.push_back(c["dialog"]);
  std::ofstream(dialogs) << list.dump();
  Job job = Start("llama3_sampled_chat", Shards("llama3_bf16_mp2", 2), 2,
                  {"--dialogs_file=" + dialogs, absl::StrCat("--temperature=", sampled["temperature"].get<double>()),
                   absl::StrCat("--top_p=", sampled["top_p"].get<double>()),
                   absl::StrCat("--seed=", sampled["seed"].get<uint64_t>()),
                   absl::StrCat("--max_gen_len=", sampled["max_gen_len"].get<int>()), "--max_seq_len=128",
                   "--logprobs", "--tokenizer_path=" + TokenizerOf("llama3")});
  ExpectSuccess(job);
  EXPECT_GE(ExpectSampledRows(ReadJsonl(job.dir + "/out.jsonl"), sampled), 16u)
      << "too few agreeing draws to prove anything";
}

INSTANTIATE_TEST_SUITE_P(Models, WorkerMultiProcessTest,
                         ::testing::Combine(::testing::Values("tiny_fp32_mp1", "gqa_bf16_mp1", "llama3_bf16_mp1"),
                                            ::testing::Values(1, 2, 4)));

// Speculative decoding changes no answer: greedy and sampled jobs on 1 and
// 2 ranks, with n-gram lookup's guesses and with a draft model's (the
// fixture converted again to int8: self-speculation, on rank 0), write the
// token ids and log-probabilities of the same job without guesses, bit for
// bit (so greedy still equals PyTorch's), and the summary counts the
// guesses. Every step verifies guesses (--speculation_priced=false): priced,
// a job this short tries a few guesses with one request before its steps
// are priced, too few to test anything. This fixture's answers seldom
// repeat themselves (few n-gram guesses, seldom kept); its int8 copy's
// greedy tokens are often its own.
TEST(WorkerSpeculationTest, GuessesChangeNoAnswer) {
  const std::string model = "tiny_fp32_mp1";
  const std::string draft = Shards(model, 1, DType::kQ8_0);
  for (const int world_size : {1, 2}) {
    for (const bool greedy : {true, false}) {
      std::vector<std::string> flags = {"--prompts_file=" + WritePrompts(model), "--max_gen_len=32",
                                        "--max_seq_len=128", "--logprobs", "--seed=5"};
      flags.push_back(greedy ? "--temperature=0" : "--temperature=0.7");
      const std::string name = absl::StrCat("speculation_", world_size, greedy ? "_greedy" : "_sampled");
      Job plain = Start(name + "_plain", Shards(model, world_size), world_size, flags);
      ExpectSuccess(plain);
      const std::vector<nlohmann::json> a = ReadJsonl(plain.dir + "/out.jsonl");
      ASSERT_EQ(a.size(), 4u) << plain.Log(0);
      EXPECT_THAT(plain.Log(0), Not(HasSubstr("speculation")));
      for (const std::string& source : {std::string("--speculative_ngram"), "--draft_shard_dir=" + draft}) {
        std::vector<std::string> guessing = flags;
        guessing.insert(guessing.end(), {source, "--num_speculative_tokens=5", "--speculation_priced=false"});
        const std::string run = name + (source == "--speculative_ngram" ? "_ngram" : "_draft");
        Job guessed = Start(run, Shards(model, world_size), world_size, guessing);
        ExpectSuccess(guessed);
        const std::vector<nlohmann::json> b = ReadJsonl(guessed.dir + "/out.jsonl");
        ASSERT_EQ(b.size(), 4u) << guessed.Log(0);
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(b[i]["token_ids"], a[i]["token_ids"]) << run << " prompt " << i;
          EXPECT_EQ(b[i]["logprobs"], a[i]["logprobs"]) << run << " prompt " << i;  // Bit for bit.
          if (greedy) {
            EXPECT_EQ(b[i]["token_ids"], Golden(model)["text_completions"][i]["token_ids"]) << i;
          }
        }
        EXPECT_THAT(guessed.Log(0), ContainsRegex(source == "--speculative_ngram"
                                                      ? "n-gram speculation kept [0-9]+ of [1-9][0-9]* guesses"
                                                      : "draft speculation kept [1-9][0-9]* of [0-9]+ guesses"))
            << run;
      }
    }
  }
}

// A draft of another vocabulary, or a folder without a one-rank shard, is
// refused before the job runs, naming the flag.
TEST(WorkerSpeculationTest, ADraftThatCannotServeIsRefused) {
  const std::vector<std::string> flags = {"--prompt=hello", "--max_gen_len=4"};
  std::vector<std::string> other_vocabulary = flags;
  other_vocabulary.push_back("--draft_shard_dir=" + Shards("llama3_bf16_mp1", 1));
  Job job = Start("draft_vocabulary", Shards("tiny_fp32_mp1", 1), 1, other_vocabulary);
  ExpectEveryRankFails(job, 2);
  EXPECT_THAT(job.Log(0), HasSubstr("the draft's vocabulary has"));
  std::vector<std::string> two_ranks = flags;
  two_ranks.push_back("--draft_shard_dir=" + Shards("tiny_fp32_mp1", 2));
  Job missing = Start("draft_missing", Shards("tiny_fp32_mp1", 1), 1, two_ranks);
  ExpectEveryRankFails(missing, 2);
  EXPECT_THAT(missing.Log(0), HasSubstr("rank-0-of-1.shard; convert the draft for one rank"));
  std::vector<std::string> both = two_ranks;
  both.push_back("--speculative_ngram");
  Job refused = Start("draft_and_ngram", Shards("tiny_fp32_mp1", 1), 1, both);
  ExpectEveryRankFails(refused, 2);
  EXPECT_THAT(refused.Log(0), HasSubstr("give one source of speculative guesses"));
}

// With sampling, the tokens are rank 0's: other ranks' seeds do not matter,
// and the world size does not change them.
TEST(WorkerFaultTest, SampledTokensAgreeAcrossRanksAndWorldSizes) {
  const std::vector<std::string> flags = {"--prompts_file=" + WritePrompts("tiny_fp32_mp1"), "--temperature=0.9",
                                          "--top_p=0.95", "--max_gen_len=24", "--seed=7"};
  Job one = Start("sample_1", Shards("tiny_fp32_mp1", 1), 1, flags);
  ExpectSuccess(one);
  Job two = Start("sample_2", Shards("tiny_fp32_mp1", 2), 2, flags, {}, 0, {"--seed=99"});
  ExpectSuccess(two);
  const std::vector<nlohmann::json> a = ReadJsonl(one.dir + "/out.jsonl"), b = ReadJsonl(two.dir + "/out.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]["token_ids"], b[i]["token_ids"]) << i;
}

// A prompt that cannot run costs its own answer: the others run, its line
// in --output carries the error, every line its index, and the job exits 1
// (it ran; not 2, a refusal of the whole input) saying how many failed. A
// rerun resumes (the answered prompts are not run again); a different
// prompts file is refused (2), not resumed.
TEST(WorkerFaultTest, ABadPromptCostsOneAnswerAndARerunResumes) {
  const std::string shards = Shards("tiny_fp32_mp1", 1);
  nlohmann::json prompts = nlohmann::json::array();
  for (const auto& c : Golden("tiny_fp32_mp1")["text_completions"]) prompts.push_back(c["prompt"]);
  std::string too_long;
  for (int i = 0; i < 100; ++i) too_long += "the meaning of life ";
  prompts.insert(prompts.begin() + 2, too_long);
  const std::string path = TempDir() + "/with_a_bad_prompt.json";
  std::ofstream(path) << prompts.dump();
  const std::vector<std::string> flags = {"--prompts_file=" + path, "--temperature=0", "--max_seq_len=128",
                                          "--max_gen_len=8"};
  Job first = Start("bad_prompt", shards, 1, flags);
  ExpectEveryRankFails(first, 1);
  EXPECT_THAT(first.Log(0), HasSubstr("error: prompt 2 cannot run: prompt 2 has"));
  EXPECT_THAT(first.Log(0), HasSubstr("1 of 5 prompts could not run"));
  // No GPU here: the device line says so, whatever the binary was built with.
  EXPECT_THAT(first.Log(0), ::testing::AnyOf(HasSubstr("device cpu (chosen: no GPU visible)"),
                                           HasSubstr("device cpu (chosen: this binary has no CUDA backend)")));
  const std::vector<nlohmann::json> rows = ReadJsonl(first.dir + "/out.jsonl");
  ASSERT_EQ(rows.size(), 5u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["index"], i);
    EXPECT_EQ(rows[i].contains("error"), i == 2) << rows[i];
  }
  EXPECT_THAT(rows[2]["error"].get<std::string>(), HasSubstr("more than max_seq_len 128"));

  Job again = Start("bad_prompt", shards, 1, flags);
  ExpectEveryRankFails(again, 1);
  EXPECT_THAT(again.Log(0), HasSubstr("resuming: 4 of 5 prompts done"));
  EXPECT_THAT(again.Log(0), HasSubstr("generating for 1 prompt(s)"));
  const std::vector<nlohmann::json> resumed = ReadJsonl(again.dir + "/out.jsonl");
  ASSERT_EQ(resumed.size(), 5u);
  for (size_t i : {0, 1, 3, 4}) {
    EXPECT_EQ(resumed[i < 2 ? i : i - 1], rows[i]) << i;
  }
  EXPECT_EQ(resumed[4]["index"], 2);

  prompts.erase(prompts.begin() + 2);
  std::ofstream(path) << prompts.dump();
  Job other = Start("bad_prompt", shards, 1, flags);
  ExpectEveryRankFails(other, 2);
  EXPECT_THAT(other.Log(0), HasSubstr("holds answers of another job: prompts or dialogs differ (this job: \"4 prompts ("));
  EXPECT_EQ(ReadJsonl(other.dir + "/out.jsonl"), resumed);
}

// A rerun into the same --output is the same job or no job: another model,
// the same checkpoint converted to another dtype, or a longer --max_gen_len
// is refused before loading (2), naming the file and what differs, and the
// file stays as it was; the same job at another tensor-parallel degree
// resumes it; --overwrite_output writes exactly what a run into a fresh
// file writes. A rerun that fails before its first answer leaves the old
// file whole (and, killed, too: ResultsTest covers the state on disk before
// the first answer).
TEST(WorkerOutputTest, ARerunIsTheSameJobOrRefused) {
  const std::vector<std::string> flags = {"--prompts_file=" + WritePrompts("tiny_fp32_mp1"), "--temperature=0",
                                          "--max_gen_len=8"};
  const std::string tiny = Shards("tiny_fp32_mp1", 1);
  Job first = Start("rerun", tiny, 1, flags);
  ExpectSuccess(first);
  const std::string path = first.dir + "/out.jsonl";
  const std::string answers = ReadFileOrEmpty(path);
  ASSERT_EQ(ReadJsonl(path).size(), 4u);

  const std::vector<std::string> longer = {flags[0], flags[1], "--max_gen_len=16"};
  const struct {
    const char* name;
    std::string shards;
    std::vector<std::string> flags;
    const char* differs;
  } others[] = {
      {"another model", Shards("gqa_bf16_mp1", 1), flags, "model shards differ (this job: \""},
      {"another dtype", Shards("tiny_fp32_mp1", 1, DType::kQ8_0), flags, "weight dtypes differ (this job: \"f32 x "},
      {"a longer --max_gen_len", tiny, longer, "--max_gen_len values differ (this job: 16; the file's: 8)"},
  };
  for (const auto& other : others) {
    Job rerun = Start("rerun", other.shards, 1, other.flags);
    ExpectEveryRankFails(rerun, 2);
    EXPECT_THAT(rerun.Log(0), HasSubstr(absl::StrCat("--output=", path, " holds answers of another job: ",
                                                     other.differs)))
        << other.name;
    EXPECT_THAT(rerun.Log(0), Not(HasSubstr("loaded "))) << other.name << ": refused after loading";
    EXPECT_EQ(ReadFileOrEmpty(path), answers) << other.name;
  }

  Job two_ranks = Start("rerun", Shards("tiny_fp32_mp1", 2), 2, flags);
  ExpectSuccess(two_ranks);
  EXPECT_THAT(two_ranks.Log(0), HasSubstr("resuming: 4 of 4 prompts done"));
  EXPECT_EQ(ReadFileOrEmpty(path), answers);

  // Rank 1 of another model: the ranks disagree while loading, after rank 0
  // began the new file beside the old one.
  const std::string gqa_two = Shards("gqa_bf16_mp1", 2);
  Job failed = Start("rerun", Shards("tiny_fp32_mp1", 2), 2, {flags[0], flags[1], "--max_gen_len=16",
                                                               "--overwrite_output"},
                     {}, 0, {"--shard_dir=" + gqa_two});
  const absl::StatusOr<ExitStatus> rank0 = failed.ranks[0]->Wait(60s);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  EXPECT_FALSE(rank0->success()) << failed.Log(0);
  ASSERT_TRUE(failed.ranks[1]->Wait(60s).ok());
  EXPECT_EQ(ReadFileOrEmpty(path), answers);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  const std::string gqa = Shards("gqa_bf16_mp1", 1);
  Job fresh = Start("rerun_fresh", gqa, 1, flags);
  ExpectSuccess(fresh);
  std::vector<std::string> overwrite = flags;
  overwrite.push_back("--overwrite_output");
  Job replaced = Start("rerun", gqa, 1, overwrite);
  ExpectSuccess(replaced);
  EXPECT_THAT(replaced.Log(0), Not(HasSubstr("resuming")));
  EXPECT_EQ(ReadFileOrEmpty(path), ReadFileOrEmpty(fresh.dir + "/out.jsonl"));
  EXPECT_NE(ReadFileOrEmpty(path), answers);
}

// --kv_cache_free_share sizes the pool from free memory, and the ranks agree
// on the smallest (rank 0 hands out block ids every rank's pool must have):
// the job runs at 2 ranks with a larger pool than the default.
TEST(WorkerKvCacheTest, FreeMemoryShareSizesThePoolAndRanksAgree) {
  Job job = Start("free_share", Shards("tiny_fp32_mp1", 2), 2,
                  {"--prompts_file=" + WritePrompts("tiny_fp32_mp1"), "--temperature=0", "--max_gen_len=32",
                   "--max_seq_len=128", "--kv_cache_free_share=0.001"});
  ExpectSuccess(job);
  const std::regex blocks("KV cache of ([0-9]+) blocks of 16 positions");
  std::smatch match;
  const std::string log = job.Log(0);
  ASSERT_TRUE(std::regex_search(log, match, blocks)) << log;
  EXPECT_GT(std::stoll(match[1]), 32) << "no more than the default pool (4 x 128 positions)";
}

TEST(WorkerFaultTest, KilledRankMakesThePeersExitNamingIt) {
  const std::string shards = Shards("tiny_fp32_mp1", 2);
  Job job = Start("kill", shards, 2,
                  {"--prompts_file=" + WritePrompts("tiny_fp32_mp1"), "--temperature=0", "--max_seq_len=4096",
                   "--max_gen_len=4000"});
  // Wait until rank 1 is generating (it logs only warnings, so watch rank 0).
  for (int i = 0; i < 500 && job.Log(0).find("generating") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_THAT(job.Log(0), HasSubstr("generating"));
  job.ranks[1]->SignalGroup(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  absl::StatusOr<ExitStatus> exit = job.ranks[0]->Wait(30s);
  ASSERT_TRUE(exit.ok()) << "rank 0 hangs after its peer died";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  EXPECT_EQ(exit->code, 1);
  EXPECT_THAT(job.Log(0), HasSubstr("lost rank 1"));
  // The output holds the finished batches only: here none (4 prompts, one
  // batch), and never part of one.
  EXPECT_TRUE(ReadJsonl(job.dir + "/out.jsonl").empty());
}

// A frozen rank (SIGSTOP: alive, its sockets open, answering nothing) is
// caught by --collective_timeout, even when it is rank 0, which hosts the
// store the others ask which rank was lost: the others exit within the
// deadline plus the 2 s that question may take, not the store client's
// 30 s (the job took 38 s at --collective_timeout=5 before).
TEST(WorkerFaultTest, FrozenRankEndsThePeersWithinTheDeadline) {
  const std::string shards = Shards("tiny_fp32_mp1", 2);
  for (const int frozen : {0, 1}) {
    const int peer = 1 - frozen;
    Job job = Start(absl::StrCat("frozen", frozen), shards, 2,
                    {"--prompts_file=" + WritePrompts("tiny_fp32_mp1"), "--temperature=0", "--max_seq_len=4096",
                     "--max_gen_len=4000", "--collective_timeout=2"});
    for (int i = 0; i < 500 && job.Log(0).find("generating") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_THAT(job.Log(0), HasSubstr("generating"));
    job.ranks[frozen]->SignalGroup(SIGSTOP);
    const auto stopped = std::chrono::steady_clock::now();
    absl::StatusOr<ExitStatus> exit = job.ranks[peer]->Wait(40s);
    const auto waited = std::chrono::steady_clock::now() - stopped;
    job.ranks[frozen]->SignalGroup(SIGKILL);
    ASSERT_TRUE(exit.ok()) << "rank " << peer << " hangs while rank " << frozen << " is frozen";
    EXPECT_EQ(exit->code, 1);
    EXPECT_LT(waited, 6s) << "rank " << frozen << " frozen: rank " << peer << " took "
                          << std::chrono::duration<double>(waited).count() << " s";
    EXPECT_THAT(job.Log(peer), HasSubstr(absl::StrCat("rank ", frozen))) << job.Log(peer);
    std::printf("rank %d frozen at --collective_timeout=2: rank %d exited after %.1f s\n", frozen, peer,
                std::chrono::duration<double>(waited).count());
  }
}

TEST(WorkerFaultTest, RankThatNeverStartsFailsTheOthersAtTheDeadline) {
  Job job = Start("missing", Shards("tiny_fp32_mp1", 4), 4, {"--prompt=hello", "--rendezvous_timeout=2"}, {0, 1, 3});
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    absl::StatusOr<ExitStatus> exit = job.ranks[i]->Wait(30s);
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->code, 1);
  }
  EXPECT_THAT(job.Log(0), HasSubstr("3/4 ranks joined after 2 s; missing: 2"));
}

TEST(WorkerFaultTest, BusyPortIsAClearError) {
  absl::StatusOr<net::Socket> squatter = net::Listen("0.0.0.0", 0);
  const int port = *net::LocalPort(*squatter);
  Job job = Start("busy", Shards("tiny_fp32_mp1", 2), 2, {"--prompt=hello", "--rendezvous_timeout=2"}, {0}, port);
  absl::StatusOr<ExitStatus> exit = job.ranks[0]->Wait(30s);
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2) << "the port given is the input to change";
  EXPECT_THAT(job.Log(0), HasSubstr(absl::StrCat("port ", port)));
  EXPECT_THAT(job.Log(0), HasSubstr("already in use"));
}

// Ranks whose shards come from different conversions refuse to run together.
TEST(WorkerFaultTest, RanksWithDifferentModelsAreRefused) {
  const std::string mixed = absl::StrCat(TempDir(), "/mixed_tp2");
  std::filesystem::create_directories(mixed);
  std::filesystem::copy_file(Shards("tiny_fp32_mp1", 2) + "/rank-0-of-2.shard", mixed + "/rank-0-of-2.shard",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(Shards("tiny_fp16_mp1", 2) + "/rank-1-of-2.shard", mixed + "/rank-1-of-2.shard",
                             std::filesystem::copy_options::overwrite_existing);
  Job job = Start("mixed", mixed, 2, {"--prompt=hello"});
  ExpectRanksRefuse(job, "loaded a different model than rank");
}

TEST(WorkerFaultTest, JobFlagsAreChecked) {
  Job job = Start("no_prompt", Shards("tiny_fp32_mp1", 1), 1, {});
  ExpectEveryRankFails(job, 2);
  EXPECT_THAT(job.Log(0), HasSubstr("give exactly one of --prompt, --prompts_file, --dialogs_file"));
}

TEST(WorkerFaultTest, KvCacheDtypeIsChecked) {
  Job job = Start("bad_kv", Shards("tiny_fp32_mp1", 1), 1, {"--prompt=hello", "--kv_cache_dtype=int8"});
  ExpectEveryRankFails(job, 2);
  EXPECT_THAT(job.Log(0), HasSubstr("--kv_cache_dtype=\"int8\": expected f32, bf16 or f16"));
}

TEST(WorkerFaultTest, ShardsOfAnotherWorldSizeSayHowToConvert) {
  Job job = Start("wrong_ws", Shards("tiny_fp32_mp1", 1), 2, {"--prompt=hello"});
  ExpectRanksRefuse(job, "no shard for rank");
  EXPECT_THAT(job.Log(0), HasSubstr("no shard for rank 0 of 2"));
  EXPECT_THAT(job.Log(0), HasSubstr("--world_size=2"));
}

}  // namespace
}  // namespace llama
