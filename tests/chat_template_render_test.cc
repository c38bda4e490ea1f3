// The chat templates our GGUF files carry (tokenizer/chat_template.h),
// rendered by a real Jinja implementation (@huggingface/jinja, as
// transformers.js applies chat templates; tests/fixtures/
// render_chat_template.mjs), build the reference's prompts: Llama 3's is
// the text of our EncodeDialog tokens, Llama 2's gives the same tokens when
// each <s>...</s> exchange is encoded as the reference encodes it.

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/process.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixture.h"
#include "worker/prompt_files.h"

namespace llama {
namespace {

using ::llama::testing::NodeToolsDir;
using ::llama::testing::ReadFileOrEmpty;

constexpr char kDialogs[] = "tests/fixtures/dialogs.json";

// The template rendered for each dialog of kDialogs (a prompt or {"error"}).
nlohmann::json Rendered(ChatTemplateKind kind, const std::string& bos, const std::string& eos) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + (kind == ChatTemplateKind::kLlama2 ? "/llama2" : "/llama3");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/template.jinja") << StandardChatTemplate(kind);
  ProcessOptions options;
  options.argv = {"/usr/bin/env", "node", "tests/fixtures/render_chat_template.mjs", NodeToolsDir(),
                  dir + "/template.jinja", kDialogs, bos, eos};
  options.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  options.stdout_path = dir + "/rendered.json";
  options.stderr_path = dir + "/rendered.stderr";
  absl::StatusOr<std::unique_ptr<Process>> node = Process::Spawn(options);
  EXPECT_TRUE(node.ok()) << node.status();
  if (!node.ok()) return nullptr;
  absl::StatusOr<ExitStatus> exit = (*node)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(exit.ok() && exit->success()) << ReadFileOrEmpty(options.stderr_path);
  return nlohmann::json::parse(ReadFileOrEmpty(options.stdout_path), nullptr, /*allow_exceptions=*/false);
}

std::vector<Dialog> Dialogs() {
  absl::StatusOr<std::vector<Dialog>> dialogs = ReadDialogsFile(kDialogs);
  EXPECT_TRUE(dialogs.ok()) << dialogs.status();
  return dialogs.ok() ? *std::move(dialogs) : std::vector<Dialog>();
}

TEST(ChatTemplateRenderTest, Llama3TemplateRendersTheReferencesPrompt) {
  ASSERT_TRUE(std::filesystem::exists(NodeToolsDir() + "/node_modules/@huggingface/jinja"))
      << NodeToolsDir() << " has no @huggingface/jinja: third_party/setup.sh installs node-llama-cpp, which has it";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const nlohmann::json rendered = Rendered(ChatTemplateKind::kLlama3, "<|begin_of_text|>", "<|end_of_text|>");
  const std::vector<Dialog> dialogs = Dialogs();
  ASSERT_EQ(rendered.size(), dialogs.size());
  for (size_t i = 0; i < dialogs.size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(**tokenizer, dialogs[i]);
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_EQ(rendered[i], *(*tokenizer)->Decode(prompt->tokens)) << "dialog " << i;
  }
}

TEST(ChatTemplateRenderTest, Llama2TemplateRendersTheReferencesExchanges) {
  ASSERT_TRUE(std::filesystem::exists(NodeToolsDir() + "/node_modules/@huggingface/jinja"));
  const Tokenizer& tokenizer = testing::FixtureTokenizer();
  const nlohmann::json rendered = Rendered(ChatTemplateKind::kLlama2, "<s>", "</s>");
  const std::vector<Dialog> dialogs = Dialogs();
  ASSERT_EQ(rendered.size(), dialogs.size());
  int compared = 0;
  for (size_t i = 0; i < dialogs.size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, dialogs[i]);
    if (!prompt.ok()) continue;  // Roles the reference refuses.
    ASSERT_TRUE(rendered[i].is_string()) << "dialog " << i << ": " << rendered[i];
    std::vector<int> tokens;
    for (absl::string_view exchange : absl::StrSplit(rendered[i].get<std::string>(), "<s>", absl::SkipEmpty())) {
      const bool finished = absl::ConsumeSuffix(&exchange, "</s>");
      std::vector<int> ids = *tokenizer.Encode(exchange, /*bos=*/true, /*eos=*/finished);
      tokens.insert(tokens.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(tokens, prompt->tokens) << "dialog " << i << ": " << rendered[i];
    ++compared;
  }
  EXPECT_GE(compared, 8);
  // The template refuses roles out of turn, as the reference does.
  EXPECT_TRUE(rendered[8].contains("error")) << rendered[8];
}

}  // namespace
}  // namespace llama
