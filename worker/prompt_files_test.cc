#include "worker/prompt_files.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::FixtureTokenizer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Token ids equal the Python transcription of the reference's
// chat_completion prompt building (tests/fixtures/tokenizer_fixture.py) for every
// dialog in tests/fixtures/dialogs.json, including the invalid ones.
TEST(PromptFilesTest, ReferenceDialogsEncodeAsTheReferenceDoes) {
  absl::StatusOr<std::vector<Dialog>> dialogs = ReadDialogsFile("tests/fixtures/dialogs.json");
  ASSERT_TRUE(dialogs.ok()) << dialogs.status();
  const nlohmann::json golden = testing::ReadGolden("chat_golden.json");
  ASSERT_EQ(golden.size(), dialogs->size());
  for (size_t i = 0; i < dialogs->size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(FixtureTokenizer(), (*dialogs)[i]);
    if (golden[i].contains("error")) {
      EXPECT_EQ(prompt.status().code(), absl::StatusCode::kInvalidArgument)
          << "dialog " << i << " (reference: " << golden[i]["error"] << ")";
      continue;
    }
    ASSERT_TRUE(prompt.ok()) << "dialog " << i << ": " << prompt.status();
    EXPECT_EQ(prompt->tokens, golden[i]["tokens"].get<std::vector<int>>()) << "dialog " << i;
    EXPECT_EQ(prompt->unsafe, golden[i]["unsafe"].get<bool>()) << "dialog " << i;
  }
}

TEST(PromptFilesTest, JsonArrayOfStrings) {
  absl::StatusOr<std::vector<std::string>> prompts =
      ParsePrompts("  [\"I believe\", \"Simply put,\\n\"]", "p.json");
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  EXPECT_THAT(*prompts, ElementsAre("I believe", "Simply put,\n"));
}

TEST(PromptFilesTest, JsonLinesOfStringsAndObjects) {
  absl::StatusOr<std::vector<std::string>> prompts =
      ParsePrompts("\"one\"\n\n{\"prompt\": \"two\", \"id\": 7}\n  \n\"\"\n", "p.jsonl");
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  EXPECT_THAT(*prompts, ElementsAre("one", "two", ""));
}

TEST(PromptFilesTest, PromptErrorsNameFileLineAndField) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"\"ok\"\n{\"text\": \"x\"}\n", "p:2: object has no field \"prompt\""},
      {"\"ok\"\n\"ok\"\n{\"prompt\": 3}\n", "p:3: field \"prompt\" is a number"},
      {"\"ok\"\n[1]\n", "p:2: found a array"},
      {"\"ok\"\n\"unterminated\n", "p:2: invalid JSON"},
      {"[\"a\", 5]", "p: element 1 of the prompts array is a number"},
      {"[\"a\",\n\n 5", "p:3: invalid JSON"},
      {"", "p: no prompts found"},
      {"[]", "p: no prompts found"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<std::string>> prompts = ParsePrompts(c.text, "p");
    EXPECT_EQ(prompts.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(prompts.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

TEST(PromptFilesTest, Dialogs) {
  absl::StatusOr<std::vector<Dialog>> dialogs = ParseDialogs(
      R"([[{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}],
          [{"role": "user", "content": "Bye"}]])",
      "d.json");
  ASSERT_TRUE(dialogs.ok()) << dialogs.status();
  ASSERT_EQ(dialogs->size(), 2u);
  EXPECT_EQ((*dialogs)[0][0].role, Role::kSystem);
  EXPECT_EQ((*dialogs)[0][1].content, "Hi");
  EXPECT_EQ((*dialogs)[1][0].role, Role::kUser);
}

TEST(PromptFilesTest, DialogErrorsNameDialogMessageAndField) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {R"({"role": "user"})", "d: top level is a object; expected an array of dialogs"},
      {R"([{"role": "user", "content": "x"}])", "d: dialog 0 is a object"},
      {R"([[{"role": "user", "content": "x"}], [{"content": "y"}]])",
       "d: dialog 1, message 0: missing field \"role\""},
      {R"([[{"role": "user", "content": 5}]])", "field \"content\" is a number"},
      {R"([[{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]])",
       "d: dialog 0, message 1: field \"role\": role \"bot\""},
      {"[[\n{\"role\": }]]", "d:2: invalid JSON"},
      {"[]", "d: no dialogs found"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<Dialog>> dialogs = ParseDialogs(c.text, "d");
    EXPECT_EQ(dialogs.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(dialogs.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

TEST(PromptFilesTest, FilesAreReadFromDisk) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/prompts.jsonl";
  std::ofstream(path) << "\"from disk\"\n";
  absl::StatusOr<std::vector<std::string>> prompts = ReadPromptsFile(path);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  EXPECT_THAT(*prompts, ElementsAre("from disk"));
  absl::StatusOr<std::vector<Dialog>> missing = ReadDialogsFile("/nonexistent/d.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("dialogs file \"/nonexistent/d.json\""));
}

}  // namespace
}  // namespace llama
