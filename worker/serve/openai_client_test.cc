// The official OpenAI client (the npm package `openai`) against the server
// on the fixture model: completions and chat, streamed and not, n, seeds,
// logprobs, echo, stop strings, usage, structured output, tools (on a
// second server, with the Llama 3 fixture) and errors as its typed
// exceptions (testdata/openai_client_check.mjs lists them).

#include <filesystem>

#include <gtest/gtest.h>

#include "base/process.h"
#include "tests/fixtures/test_util.h"
#include "worker/grammar/output_validation.h"
#include "worker/serve/serving_fixture.h"

namespace llama {
namespace {

using ::llama::testing::NodeToolsDir;
using ::llama::testing::ReadFileOrEmpty;

TEST(OpenAiClientTest, TheOfficialClientWorksAgainstTheServer) {
  ASSERT_TRUE(std::filesystem::exists(NodeToolsDir() + "/node_modules/openai"))
      << NodeToolsDir() << " has no openai package: third_party/setup.sh installs it";
  ApiServerOptions options;
  options.api_keys = {"s3cret"};
  testing::Serving serving(options);
  testing::Serving llama3(options, {}, testing::kLlama3Model);
  ProcessOptions node;
  node.argv = {"/usr/bin/env",
               "node",
               "worker/serve/testdata/openai_client_check.mjs",
               NodeToolsDir(),
               absl::StrCat("http://127.0.0.1:", serving.server().port(), "/v1"),
               "s3cret",
               "tiny",
               absl::StrCat("http://127.0.0.1:", llama3.server().port(), "/v1")};
  node.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  node.stdout_path = std::string(getenv("TEST_TMPDIR")) + "/client.out";
  node.stderr_path = std::string(getenv("TEST_TMPDIR")) + "/client.err";
  absl::StatusOr<std::unique_ptr<Process>> client = Process::Spawn(node);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ExitStatus> exit = (*client)->Wait(std::chrono::seconds(120));
  ASSERT_TRUE(exit.ok()) << "the client hangs";
  EXPECT_TRUE(exit->success()) << ReadFileOrEmpty(node.stderr_path) << ReadFileOrEmpty(node.stdout_path);
  std::printf("openai client: %s", ReadFileOrEmpty(node.stdout_path).c_str());
}

// Runs `argv` (a node script) to its end within `timeout`; its output.
std::string RunNode(std::vector<std::string> argv, std::chrono::seconds timeout) {
  ProcessOptions node;
  node.argv = std::move(argv);
  node.argv.insert(node.argv.begin(), {"/usr/bin/env", "node"});
  node.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  node.stdout_path = std::string(getenv("TEST_TMPDIR")) + "/node.out";
  node.stderr_path = std::string(getenv("TEST_TMPDIR")) + "/node.err";
  absl::StatusOr<std::unique_ptr<Process>> process = Process::Spawn(node);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return "";
  absl::StatusOr<ExitStatus> exit = (*process)->Wait(timeout);
  EXPECT_TRUE(exit.ok()) << "the client hangs";
  const std::string output = ReadFileOrEmpty(node.stdout_path) + ReadFileOrEmpty(node.stderr_path);
  EXPECT_TRUE(exit.ok() && exit->success()) << output;
  return output;
}

// Every schema of worker/grammar's corpus through response_format over
// HTTP, on the Llama 2 and Llama 3 fixtures (random weights): each answer
// ends by its grammar, and python-jsonschema validates each.
TEST(OpenAiClientTest, EveryCorpusSchemaThroughResponseFormatValidates) {
  for (const char* model : {testing::kLlama2Model, testing::kLlama3Model}) {
    testing::Serving serving({}, {}, model, /*context=*/1024);
    const std::string results = absl::StrCat(getenv("TEST_TMPDIR"), "/", model, ".json");
    const std::string ran = RunNode({"worker/serve/testdata/structured_corpus.mjs", NodeToolsDir(),
                                     absl::StrCat("http://127.0.0.1:", serving.server().port(), "/v1"), "tiny",
                                     "worker/grammar/testdata/schemas.json", results},
                                    std::chrono::seconds(600));
    const grammar::ValidationReport report = grammar::ValidateOutputs(results);
    EXPECT_TRUE(report.valid) << report.text;
    std::printf("%s over HTTP: %s%s", model, ran.c_str(), report.text.c_str());
  }
}

}  // namespace
}  // namespace llama
