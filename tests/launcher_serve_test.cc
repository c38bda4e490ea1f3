// `launcher serve` end to end on the fixture checkpoint: the server's greedy
// completions of the PyTorch golden prompts at world sizes 1 and 2, a
// drain on SIGTERM that exits 0, and a worker killed while a request
// streams: the client gets an error, the launcher exits non-zero naming the
// rank within 10 s, and no process is left.

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/net.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tests/fixtures/sampled_golden.h"
#include "tests/fixtures/test_util.h"
#include "tests/launcher_run.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

// Starts `launcher serve` on `nproc` ranks (any free port) for fixture
// `model` and waits for its URL; returns the port (0 if it never came).
int StartServer(LauncherRun& run, const std::string& name, int nproc, const std::string& model = "tiny_fp32_mp1",
                const std::string& tokenizer = TokenizerFixturePath("tokenizer.model"),
                const std::string& context_flag = "--max_seq_len=128", const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"serve", "--ckpt_dir=" + CheckpointFixturePath(model), "--tokenizer_path=" + tokenizer,
                                   absl::StrCat("--shard_dir=", TempDir(), "/serve_shards_", model, "_", nproc),
                                   absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"),
                                   absl::StrCat("--nproc_per_node=", nproc), "--port=0", "--collective_timeout=5",
                                   "--grace_period=2"};
  if (!context_flag.empty()) args.push_back(context_flag);
  args.insert(args.end(), extra.begin(), extra.end());
  run = Launch(name, args);
  const std::regex url("serving " + model + " on http://127.0.0.1:([0-9]+)/v1");
  for (int i = 0; i < 600; ++i) {
    std::smatch match;
    const std::string err = run.err();
    if (std::regex_search(err, match, url)) return std::stoi(match[1]);
    if (run.process->Poll().has_value()) break;
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "no URL from the launcher:\n" << run.err();
  return 0;
}

TEST(LauncherServeTest, GreedyCompletionsEqualPyTorchAtOneAndTwoRanksAndSigtermDrains) {
  for (int nproc : {1, 2}) {
    LauncherRun run;
    const int port = StartServer(run, absl::StrCat("serve_golden_", nproc), nproc);
    ASSERT_GT(port, 0);
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(60, 0);
    for (const json& golden : Golden()["text_completions"]) {
      httplib::Result r = client.Post("/v1/completions",
                                      json{{"model", "tiny_fp32_mp1"},
                                           {"prompt", golden["prompt"]},
                                           {"max_tokens", 32},
                                           {"temperature", 0}}
                                          .dump(),
                                      "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const std::vector<int> ids = golden["token_ids"].get<std::vector<int>>();
      EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], *FixtureTokenizer().Decode(ids))
          << nproc << " rank(s), prompt " << golden["prompt"];
    }
    run.process->SignalGroup(SIGTERM);
    EXPECT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
    EXPECT_THAT(run.err(), HasSubstr("the server drained and stopped"));
    EXPECT_THAT(run.err(), HasSubstr(" s after the signal (up "));
  }
}

// --access_log: a line per request on rank 0's log, with no prompt text.
TEST(LauncherServeTest, TheAccessLogHasALinePerRequest) {
  LauncherRun run;
  const int port = StartServer(run, "serve_access_log", 1, "tiny_fp32_mp1", TokenizerFixturePath("tokenizer.model"),
                               "--max_seq_len=128", {"--access_log"});
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  httplib::Result r = client.Post(
      "/v1/completions",
      json{{"model", "tiny_fp32_mp1"}, {"prompt", "a secret prompt"}, {"max_tokens", 2}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(client.Get("/nowhere"));
  run.process->SignalGroup(SIGTERM);
  EXPECT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
  const std::string err = ReadFileOrEmpty(TempDir() + "/serve_access_log/logs/rank0.log");
  EXPECT_THAT(err, ::testing::ContainsRegex("access: 127\\.0\\.0\\.1:[0-9]+ \"POST /v1/completions HTTP/1\\.1\" 200 [0-9]+ B"));
  EXPECT_THAT(err, HasSubstr("\"GET /nowhere HTTP/1.1\" 404 "));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("a secret prompt")));
}

// Llama 3 through the chat endpoint (its header format, <|eot_id|> ending
// the answer) at 2 ranks: PyTorch's greedy answers to the golden dialogs.
// A --port already taken is refused before the checkpoint is converted or
// the model loaded (minutes for a large model), naming the flag.
TEST(LauncherServeTest, ATakenPortIsRefusedBeforeLoading) {
  absl::StatusOr<net::Socket> taken = net::Listen("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok()) << taken.status();
  const int port = *net::LocalPort(*taken);
  const std::string shard_dir = TempDir() + "/serve_shards_taken_port";
  LauncherRun run = Launch("taken_port", {"serve", "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
                                          "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
                                          "--shard_dir=" + shard_dir, "--host=127.0.0.1",
                                          absl::StrCat("--port=", port), "--max_seq_len=128"});
  EXPECT_EQ(ExitCodeOf(run, 30s), 2);  // The --port given is the input to change.
  EXPECT_THAT(run.err(), HasSubstr(absl::StrCat("--port=", port, " on --host=127.0.0.1 is already in use")));
  EXPECT_FALSE(std::filesystem::exists(shard_dir)) << "converted before checking the port";

  // An address that is not this host's (TEST-NET-3) cannot be listened on.
  LauncherRun elsewhere = Launch("foreign_host", {"serve", "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
                                                  "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
                                                  "--shard_dir=" + shard_dir, "--host=203.0.113.7", "--port=8000",
                                                  "--max_seq_len=128"});
  EXPECT_EQ(ExitCodeOf(elsewhere, 30s), 2);
  EXPECT_THAT(elsewhere.err(), HasSubstr("--port=8000 on --host=203.0.113.7 cannot be listened on: "));
  EXPECT_FALSE(std::filesystem::exists(shard_dir)) << "converted before checking the host";
}

// Without --max_seq_len a server's context is the model's own: the Llama
// 3.1-shaped fixture (use_scaled_rope) serves 131072 positions, as vLLM
// would report it.
TEST(LauncherServeTest, TheContextIsTheModelsOwn) {
  LauncherRun run;
  const int port = StartServer(run, "serve_own_context", 1, "llama3_bf16_mp1",
                               "tests/fixtures/tiktoken_fixture/tokenizer.model", /*context_flag=*/"");
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  httplib::Result r = client.Post("/tokenize", json{{"model", "llama3_bf16_mp1"}, {"prompt", "hi"}}.dump(),
                                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["max_model_len"], 131072) << r->body;
  run.process->SignalGroup(SIGTERM);
  EXPECT_EQ(ExitCodeOf(run, 30s), 0) << run.err();
}

TEST(LauncherServeTest, Llama3ChatEqualsPyTorch) {
  // The MP=2 checkpoint holds the weights whose goldens the MP=1 one has.
  std::ifstream file("tests/fixtures/engine_golden/llama3_bf16_mp1/golden.json");
  ASSERT_TRUE(file);
  const json golden = json::parse(file);
  LauncherRun run;
  const int port = StartServer(run, "serve_llama3", 2, "llama3_bf16_mp2", "tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  ASSERT_FALSE(golden["chat_completions"].empty());
  for (const json& want : golden["chat_completions"]) {
    httplib::Result r = client.Post("/v1/chat/completions",
                                    json{{"model", "llama3_bf16_mp2"}, {"messages", want["dialog"]},
                                         {"max_tokens", 32}, {"temperature", 0}}
                                        .dump(),
                                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], want["content"]) << want["dialog"];
  }
  // Sampled: the first dialog, and every text prompt in one request (choice
  // i draws from stream i, as golden row i did), token ids named by vLLM's
  // return_tokens_as_token_ids: PyTorch's tokens up to a close draw.
  for (const bool chat : {true, false}) {
    const json& sampled = golden[chat ? "sampled_chat_completions" : "sampled_text_completions"];
    json body = {{"model", "llama3_bf16_mp2"}, {"max_tokens", sampled["max_gen_len"]},
                 {"temperature", sampled["temperature"]}, {"top_p", sampled["top_p"]}, {"seed", sampled["seed"]},
                 {"logprobs", chat ? json(true) : json(0)}, {"return_tokens_as_token_ids", true}};
    if (chat) {
      body["messages"] = golden["chat_completions"][0]["dialog"];
    } else {
      body["prompt"] = json::array();
      for (const json& c : golden["text_completions"]) body["prompt"].push_back(c["prompt"]);
    }
    httplib::Result r = client.Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json answer = json::parse(r->body);
    std::vector<std::vector<int>> ids(answer["choices"].size());
    double d = 0;
    for (const json& choice : answer["choices"]) {
      const int index = choice["index"];
      std::vector<double> logprobs;
      const json& tokens = chat ? choice["logprobs"]["content"] : choice["logprobs"]["tokens"];
      for (size_t t = 0; t < tokens.size(); ++t) {
        const std::string name = chat ? tokens[t]["token"] : tokens[t];
        ASSERT_TRUE(absl::StartsWith(name, "token_id:")) << name;
        ids[index].push_back(std::stoi(name.substr(9)));
        logprobs.push_back(chat ? tokens[t]["logprob"].get<double>() : choice["logprobs"]["token_logprobs"][t].get<double>());
      }
      d = std::max(d, testing::LogprobDifference(ids[index], logprobs, sampled["rows"][index]));
    }
    size_t agreed = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_TRUE(testing::SampledRowAgrees(ids[i], sampled["rows"][i],
                                            testing::CloseDraw(d, sampled["temperature"]), &agreed))
          << (chat ? "chat" : "text") << " choice " << i << " (log-prob difference " << d << ")";
    }
    EXPECT_GE(agreed, chat ? 16u : 40u) << (chat ? "chat" : "text");
  }
  run.process->SignalGroup(SIGTERM);
  EXPECT_EQ(ExitCodeOf(run, 60s), 0) << run.err();
}

TEST(LauncherServeTest, AKilledWorkerFailsTheStreamsAndTheLauncher) {
  LauncherRun run;
  const int port = StartServer(run, "serve_kill", 2);
  ASSERT_GT(port, 0);
  const std::vector<pid_t> workers = ChildrenOf(run.process->pid());
  ASSERT_EQ(workers.size(), 2u);
  // Streams one request after another until one fails: the kill lands in
  // the middle of one of them (the fixture model is fast).
  std::string failure;
  int answered = 0;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    while (true) {
      httplib::Result r = c.Post("/v1/completions",
                                 json{{"model", "tiny_fp32_mp1"}, {"prompt", "Hello"}, {"max_tokens", 100},
                                      {"stream", true}, {"stop", {"\x01"}}}
                                     .dump(),
                                 "application/json");
      if (!r) {
        failure = absl::StrCat("connection: ", httplib::to_string(r.error()));
        return;
      }
      if (r->status != 200 || r->body.find("\"error\"") != std::string::npos ||
          r->body.find("[DONE]") == std::string::npos) {
        failure = absl::StrCat("HTTP ", r->status, ": ", r->body.substr(r->body.size() > 300 ? r->body.size() - 300 : 0));
        return;
      }
      ++answered;
    }
  });
  std::this_thread::sleep_for(500ms);
  // The worker that is not rank 0 (rank 0 was started first).
  ::kill(workers[1], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int code = ExitCodeOf(run, 30s);
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  EXPECT_NE(code, 0);
  EXPECT_THAT(run.err(), HasSubstr("rank"));
  EXPECT_GT(answered, 0);
  EXPECT_FALSE(failure.empty());
  // A cut stream ends with the error, never as if its choice were complete.
  EXPECT_THAT(failure, ::testing::Not(HasSubstr("\"finish_reason\":\"length\"")));
  std::printf("after the kill the client saw: %s\n", failure.c_str());
  EXPECT_TRUE(AllGone(workers));
}

// The batch job's answer to `dialog` (greedy, 12 tokens, 2 ranks).
std::string JobAnswer(const std::string& name, const json& dialog) {
  const std::string dialogs = absl::StrCat(TempDir(), "/", name, ".json");
  std::ofstream(dialogs) << json::array({dialog}).dump();
  LauncherRun job = Launch(name, {"--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1"),
                                  "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model"),
                                  absl::StrCat("--shard_dir=", TempDir(), "/serve_shards_tiny_fp32_mp1_2"),
                                  absl::StrCat("--log_dir=", TempDir(), "/", name, "/logs"), "--nproc_per_node=2",
                                  "--max_seq_len=128", "--temperature=0", "--max_gen_len=12",
                                  "--dialogs_file=" + dialogs,
                                  absl::StrCat("--output=", TempDir(), "/", name, ".jsonl")});
  EXPECT_EQ(ExitCodeOf(job, 60s), 0) << job.err();
  std::ifstream out(absl::StrCat(TempDir(), "/", name, ".jsonl"));
  std::string line;
  std::getline(out, line);
  return json::parse(line)["generation"]["content"];
}

// launcher chat with its turns on stdin (not a terminal: no prompt, a turn
// per line): each answer streams out and is the batch job's answer to the
// dialog so far, history included; end of input stops the workers, exit 0.
TEST(LauncherChatTest, ScriptedTurnsKeepTheHistoryAndMatchTheBatchJob) {
  const std::string input = absl::StrCat(TempDir(), "/chat_input.txt");
  std::ofstream(input) << "Hello\nHow are you?\n";
  LauncherRun chat = RunProgram(
      "chat", {"/bin/sh", "-c",
               absl::StrCat("exec launcher/launcher chat --ckpt_dir=", CheckpointFixturePath("tiny_fp32_mp1"),
                            " --tokenizer_path=", TokenizerFixturePath("tokenizer.model"), " --shard_dir=", TempDir(),
                            "/serve_shards_tiny_fp32_mp1_2 --log_dir=", TempDir(), "/chat/logs --nproc_per_node=2 "
                            "--max_seq_len=128 --temperature=0 --max_gen_len=12 < ", input)},
      {"HOME=" + TempDir(), "PATH=/usr/bin:/bin"});
  ASSERT_EQ(ExitCodeOf(chat, 60s), 0) << chat.err();
  const std::string first = JobAnswer("chat_turn1", {{{"role", "user"}, {"content", "Hello"}}});
  const std::string second = JobAnswer("chat_turn2", {{{"role", "user"}, {"content", "Hello"}},
                                                      {{"role", "assistant"}, {"content", first}},
                                                      {{"role", "user"}, {"content", "How are you?"}}});
  EXPECT_EQ(chat.out(), absl::StrCat(first, "\n", second, "\n"));
  EXPECT_THAT(chat.err(), HasSubstr("chatting with tiny_fp32_mp1"));
}

// A turn past the context gets the server's reason and what to do, not an
// empty "error: "; the chat ends on it, so it exits 1 (the session ran, as
// a batch job with a prompt that could not run; not 2).
TEST(LauncherChatTest, ATurnPastTheContextSaysWhy) {
  const std::string input = absl::StrCat(TempDir(), "/chat_long_input.txt");
  std::string turn;
  for (int i = 0; i < 300; ++i) turn += "hello ";
  std::ofstream(input) << turn << "\n";
  LauncherRun chat = RunProgram(
      "chat_long", {"/bin/sh", "-c",
                    absl::StrCat("exec launcher/launcher chat --ckpt_dir=", CheckpointFixturePath("tiny_fp32_mp1"),
                                 " --tokenizer_path=", TokenizerFixturePath("tokenizer.model"), " --shard_dir=",
                                 TempDir(), "/serve_shards_tiny_fp32_mp1_1 --log_dir=", TempDir(),
                                 "/chat_long/logs --nproc_per_node=1 --max_seq_len=128 --temperature=0 < ", input)},
      {"HOME=" + TempDir(), "PATH=/usr/bin:/bin"});
  EXPECT_EQ(ExitCodeOf(chat, 60s), 1) << chat.err();
  const std::string said = chat.out() + chat.err();
  EXPECT_THAT(said, HasSubstr("context of 128 tokens")) << said;
  EXPECT_THAT(chat.err(), HasSubstr("the chat ended on a turn that failed")) << said;
  EXPECT_THAT(said, HasSubstr("/reset starts a new dialog")) << said;
}

// A chat whose history outgrows the context goes on: the oldest exchange
// is dropped, saying so, and the turn is answered as if the dialog began
// there (both turns are the same text, so both answers are the same).
TEST(LauncherChatTest, AHistoryPastTheContextDropsItsOldestTurns) {
  const std::string input = absl::StrCat(TempDir(), "/chat_history_input.txt");
  std::string turn;
  for (int i = 0; i < 12; ++i) turn += "hello ";  // About 75 of the 128 tokens with the chat format's markers.
  std::ofstream(input) << turn << "\n" << turn << "\n";
  LauncherRun chat = RunProgram(
      "chat_history", {"/bin/sh", "-c",
                       absl::StrCat("exec launcher/launcher chat --ckpt_dir=", CheckpointFixturePath("tiny_fp32_mp1"),
                                    " --tokenizer_path=", TokenizerFixturePath("tokenizer.model"), " --shard_dir=",
                                    TempDir(), "/serve_shards_tiny_fp32_mp1_1 --log_dir=", TempDir(),
                                    "/chat_history/logs --nproc_per_node=1 --max_seq_len=128 --temperature=0 "
                                    "--max_gen_len=12 < ", input)},
      {"HOME=" + TempDir(), "PATH=/usr/bin:/bin"});
  ASSERT_EQ(ExitCodeOf(chat, 60s), 0) << chat.err();
  const std::string note = "(the history no longer fits the model's context: its oldest turn is dropped)\n";
  const std::string out = chat.out();
  const size_t at = out.find(note);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_GT(at, 1u) << "the first answer is empty: " << out;
  EXPECT_EQ(out.substr(0, at), out.substr(at + note.size())) << out;
}

// launcher chat on a pseudo-terminal, as a person uses it: a prompt, an
// answer, Ctrl-C (the terminal's interrupt character) at the prompt does
// not end the chat, /exit leaves with exit code 0. (Ctrl-C during an answer
// stops the answer; the fixture model answers too fast to catch one.)
TEST(LauncherChatTest, OnATerminalCtrlCDoesNotEndTheChat) {
  int master = -1;
  const std::string cwd = std::filesystem::current_path().string();
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: the pty is its controlling terminal (forkpty made it so).
    const std::string home = "HOME=" + TempDir();
    const std::string ckpt = "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1");
    const std::string tokenizer = "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model");
    const std::string shards = absl::StrCat("--shard_dir=", TempDir(), "/serve_shards_tiny_fp32_mp1_2");
    const std::string logs = absl::StrCat("--log_dir=", TempDir(), "/chat_pty/logs");
    const std::string launcher = cwd + "/launcher/launcher";
    char* const argv[] = {const_cast<char*>(launcher.c_str()), const_cast<char*>("chat"),
                          const_cast<char*>(ckpt.c_str()), const_cast<char*>(tokenizer.c_str()),
                          const_cast<char*>(shards.c_str()), const_cast<char*>(logs.c_str()),
                          const_cast<char*>("--nproc_per_node=2"), const_cast<char*>("--max_seq_len=2048"),
                          const_cast<char*>("--temperature=0"), nullptr};
    char* const env[] = {const_cast<char*>(home.c_str()), const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    execve(argv[0], argv, env);
    _exit(127);
  }
  std::string seen;
  size_t cursor = 0;  // Where the last awaited text ended.
  // Reads from the pty until `done()` (or 20 s, or the pty closes).
  const auto read_until = [&](const auto& done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(master, buffer, sizeof buffer);
      if (n <= 0) break;
      seen.append(buffer, n);
    }
  };
  // Reads until `text` appears after the cursor, then moves the cursor past it.
  const auto await = [&](const std::string& text) {
    read_until([&] { return seen.find(text, cursor) != std::string::npos; });
    const size_t at = seen.find(text, cursor);
    if (at == std::string::npos) return false;
    cursor = at + text.size();
    return true;
  };
  ASSERT_TRUE(await("chatting with tiny_fp32_mp1")) << seen;
  ASSERT_TRUE(await("> ")) << seen;
  const std::string hello = "Hello\n";
  ASSERT_EQ(::write(master, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  ASSERT_TRUE(await("Hello\r\n")) << seen;  // The terminal's echo.
  // Ctrl-C while the answer streams (the fixture's greedy answer runs to the
  // 2048-position context: seconds): the answer stops, the chat goes on.
  read_until([&] { return seen.size() >= cursor + 16; });
  const std::string interrupt = "\x03";
  ASSERT_EQ(::write(master, interrupt.data(), 1), 1);
  ASSERT_TRUE(await(" [stopped]")) << "Ctrl-C did not stop the answer:\n" << seen;
  ASSERT_TRUE(await("\n> ")) << "no prompt after the stopped answer:\n" << seen;
  // Ctrl-C at the prompt: the chat goes on.
  ASSERT_EQ(::write(master, interrupt.data(), 1), 1);
  ASSERT_TRUE(await("> ")) << "Ctrl-C ended the chat:\n" << seen;
  EXPECT_EQ(seen.find("error"), std::string::npos) << seen;
  const std::string bye = "/exit\n";
  ASSERT_EQ(::write(master, bye.data(), bye.size()), static_cast<ssize_t>(bye.size()));
  await("\x04");  // Drains the output until the pty closes.
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << seen;
  ::close(master);
}

}  // namespace
}  // namespace llama::testing
