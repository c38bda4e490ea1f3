// The official OpenAI client (the npm package `openai`) against the server
// on the fixture model: completions and chat, streamed and not, n, seeds,
// logprobs, echo, stop strings, usage, structured output, tools (on a
// second server, with the Llama 3 fixture) and errors as its typed
// exceptions (testdata/openai_client_check.mjs lists them).

#include <filesystem>

#include <gtest/gtest.h>

#include "base/process.h"
#include "tests/fixtures/test_util.h"
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

}  // namespace
}  // namespace llama
