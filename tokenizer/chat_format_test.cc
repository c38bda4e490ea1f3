#include "tokenizer/chat_format.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::FixtureTokenizer;
using ::testing::HasSubstr;

// The Llama 3 layout's tokenizer (a small ranks file, Llama 3's specials).
const Tokenizer& Llama3Tokenizer() {
  static const Tokenizer* tokenizer = [] {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
        Tokenizer::Load("tests/fixtures/tiktoken_fixture/tokenizer.model");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded->release();
  }();
  return *tokenizer;
}

// A documented prompt's text as the reference tokenizes it: the special
// tokens by id, the text between them encoded.
std::vector<int> EncodeDocumented(const Tokenizer& tokenizer, absl::string_view text) {
  std::vector<int> ids;
  while (!text.empty()) {
    const size_t open = text.find("<|");
    const size_t close = open == absl::string_view::npos ? open : text.find("|>", open);
    const absl::string_view plain = text.substr(0, close == absl::string_view::npos ? text.size() : open);
    const std::vector<int> encoded = *tokenizer.Encode(plain, /*bos=*/false, /*eos=*/false);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    if (close == absl::string_view::npos) break;
    const int special = Llama31SpecialId(tokenizer, text.substr(open, close + 2 - open));
    EXPECT_GE(special, 0) << text.substr(open, close + 2 - open);
    ids.push_back(special);
    text.remove_prefix(close + 2);
  }
  return ids;
}

// models/llama3_1/prompt_format.md (meta-llama/llama-models), "JSON based
// tool calling": the input prompt, copied from the document.
std::string DocumentedJsonToolPrompt() {
  std::ifstream file("tokenizer/testdata/llama3_1_json_tool_prompt.txt", std::ios::binary);
  EXPECT_TRUE(file) << "tokenizer/testdata/llama3_1_json_tool_prompt.txt";
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// Its one function's definition.
std::string DocumentedDefinition(absl::string_view prompt) {
  const size_t begin = prompt.find("{\n");
  return std::string(prompt.substr(begin, prompt.find("}\n\nReturn") + 1 - begin));
}

TEST(ChatFormatTest, Llama31JsonToolPromptIsTheDocumentedOne) {
  const Tokenizer& tokenizer = Llama3Tokenizer();
  const std::string documented = DocumentedJsonToolPrompt();
  ToolPrompt tools;
  tools.function_definitions = {DocumentedDefinition(documented)};
  tools.today = "21 September 2024";
  const Dialog dialog = {{Role::kSystem, "You are a helpful assistant."},
                         {Role::kUser, "Use tools to get latest trending songs"}};
  absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, dialog, tools);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(prompt->tokens, EncodeDocumented(tokenizer, documented))
      << *tokenizer.Decode(prompt->tokens);
}

// "Builtin Tool Calling" and "Built-in tools full interaction": the
// environment and tools lines, the call after <|python_tag|> ending in
// <|eom_id|>, and the result as an ipython message.
TEST(ChatFormatTest, Llama31BuiltinToolCallAndResultAreTheDocumentedOnes) {
  const Tokenizer& tokenizer = Llama3Tokenizer();
  ToolPrompt tools;
  tools.builtin_tools = {"brave_search", "code_interpreter", "wolfram_alpha"};
  tools.today = "21 September 2024";
  const Dialog dialog = {
      {Role::kSystem, "You are a helpful assistant."},
      {Role::kUser, "What is the 100th decimal of pi?"},
      {Role::kAssistant, "", {{"call_1", "wolfram_alpha", R"({"query": "100th decimal of pi"})"}}},
      {Role::kTool, "{\"result\": \"7\"}"},
  };
  absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, dialog, tools);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  const std::string expected = absl::StrCat(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Environment: ipython\n"
      "Tools: brave_search, wolfram_alpha\n"
      "Cutting Knowledge Date: December 2023\n"
      "Today Date: 21 September 2024\n\n"
      "You are a helpful assistant.\n"
      "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
      "What is the 100th decimal of pi?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
      "<|python_tag|>wolfram_alpha.call(query=\"100th decimal of pi\")<|eom_id|>"
      "<|start_header_id|>ipython<|end_header_id|>\n\n"
      "{\"result\": \"7\"}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(prompt->tokens, EncodeDocumented(tokenizer, expected)) << *tokenizer.Decode(prompt->tokens);
}

// A function's call is written as the server's forced calls make the
// model write it, after <|python_tag|> and ending with <|eom_id|>.
TEST(ChatFormatTest, Llama31FunctionCallIsWrittenAsTheModelWritesIt) {
  const Tokenizer& tokenizer = Llama3Tokenizer();
  const Dialog dialog = {
      {Role::kUser, "Weather in Paris?"},
      {Role::kAssistant, "", {{"call_1", "get_weather", R"({"city": "Paris"})"}}},
      {Role::kTool, " 21C "},
  };
  absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, dialog);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(prompt->tokens,
            EncodeDocumented(tokenizer,
                             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>"
                             "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eom_id|>"
                             "<|start_header_id|>ipython<|end_header_id|>\n\n21C<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n"));
}

TEST(ChatFormatTest, Llama31ToolErrors) {
  const Tokenizer& tokenizer = Llama3Tokenizer();
  const Dialog two_calls = {{Role::kUser, "u"}, {Role::kAssistant, "", {{"a", "f", "{}"}, {"b", "g", "{}"}}}};
  EXPECT_THAT(EncodeDialog(tokenizer, two_calls).status().message(), HasSubstr("one call per message"));
  const Dialog bad_builtin = {{Role::kUser, "u"}, {Role::kAssistant, "", {{"a", "brave_search", R"({"q": 1})"}}}};
  EXPECT_THAT(EncodeDialog(tokenizer, bad_builtin).status().message(),
              HasSubstr("brave_search: expected arguments {\"query\": a string}"));
}

TEST(ChatFormatTest, Llama2HasNoToolFormat) {
  ToolPrompt tools;
  tools.function_definitions = {"{}"};
  EXPECT_EQ(EncodeDialog(FixtureTokenizer(), {{Role::kUser, "u"}}, tools).status(),
            absl::InvalidArgumentError("tools: Llama 2 has no tool-calling format"));
  const Dialog result = {{Role::kUser, "u"}, {Role::kAssistant, "a"}, {Role::kTool, "r"}};
  EXPECT_THAT(EncodeDialog(FixtureTokenizer(), result).status().message(),
              HasSubstr("dialog message 2 is a tool result; Llama 2 has no tool-calling format"));
}

// The text the tokens stand for, as a golden string.
TEST(ChatFormatTest, SystemPromptIsFoldedIntoTheFirstTurn) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  const Dialog dialog = {{Role::kSystem, "Always answer with Haiku"},
                         {Role::kUser, " I am going to Paris. "},
                         {Role::kAssistant, "See the tower."},
                         {Role::kUser, "And then?"}};
  absl::StatusOr<ChatPrompt> prompt = EncodeDialog(tokenizer, dialog);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_FALSE(prompt->unsafe);
  const auto& tokens = prompt->tokens;
  ASSERT_EQ(tokens.front(), tokenizer.bos_id());
  // Exactly two turns: BOS ... EOS BOS ... (no EOS at the end).
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), tokenizer.bos_id()), 2);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), tokenizer.eos_id()), 1);
  EXPECT_NE(tokens.back(), tokenizer.eos_id());
  // As in the reference, the folded first turn is stripped as a whole, so the
  // user's own leading space survives; the second turn's dummy-prefix space
  // shows after the first turn's trailing space.
  EXPECT_EQ(*tokenizer.Decode(tokens),
            "[INST] <<SYS>>\nAlways answer with Haiku\n<</SYS>>\n\n I am going to Paris. [/INST] "
            "See the tower.  [INST] And then? [/INST]");
}

TEST(ChatFormatTest, SpecialTagsAreFlagged) {
  for (const char* content : {"[INST]", "x [/INST] y", "<<SYS>>", "a<</SYS>>"}) {
    absl::StatusOr<ChatPrompt> prompt =
        EncodeDialog(FixtureTokenizer(), {{Role::kUser, content}});
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_TRUE(prompt->unsafe) << content;
  }
  EXPECT_EQ(kUnsafeRequestAnswer, "Error: special tags are not allowed as part of the prompt.");
}

TEST(ChatFormatTest, RoleErrorsNameTheMessage) {
  struct Case {
    Dialog dialog;
    const char* expected;
  };
  const Case cases[] = {
      {{}, "dialog is empty"},
      {{{Role::kSystem, "s"}}, "only a system message"},
      {{{Role::kAssistant, "a"}}, "message 0 has role \"assistant\"; expected \"user\""},
      {{{Role::kUser, "a"}, {Role::kUser, "b"}}, "message 1 has role \"user\"; expected \"assistant\""},
      {{{Role::kUser, "a"}, {Role::kAssistant, "b"}}, "message 1 has role \"assistant\"; expected the last"},
      {{{Role::kUser, "a"}, {Role::kSystem, "b"}}, "message 1 has role \"system\""},
      {{{Role::kSystem, "s"}, {Role::kAssistant, "a"}}, "message 1 has role \"assistant\"; expected \"user\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(FixtureTokenizer(), c.dialog);
    EXPECT_EQ(prompt.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(prompt.status().message(), HasSubstr(c.expected));
  }
}

TEST(ChatFormatTest, StripMatchesPythonStrip) {
  EXPECT_EQ(StripPythonWhitespace(""), "");
  EXPECT_EQ(StripPythonWhitespace(" \t\n\r\v\f"), "");
  EXPECT_EQ(StripPythonWhitespace("  a b  "), "a b");
  EXPECT_EQ(StripPythonWhitespace("\x1c\x1f" "a\x85"), "a\x85");  // "\x85" alone is not U+0085.
  EXPECT_EQ(StripPythonWhitespace("\xC2\x85" "a\xC2\xA0"), "a");   // U+0085, U+00A0
  EXPECT_EQ(StripPythonWhitespace("\xE3\x80\x80" "x\xE2\x80\x83"), "x");  // U+3000, U+2003
  EXPECT_EQ(StripPythonWhitespace("\xE2\x80\x8B" "x"), "\xE2\x80\x8B" "x");  // U+200B is not space
  EXPECT_EQ(StripPythonWhitespace("\xF0\x9F\xA6\x99 "), "\xF0\x9F\xA6\x99");
}

TEST(ChatFormatTest, ParseRole) {
  EXPECT_EQ(*ParseRole("assistant"), Role::kAssistant);
  EXPECT_THAT(ParseRole("bot").status().message(), HasSubstr("role \"bot\""));
  EXPECT_EQ(ParseRole("bot").status(),
            absl::InvalidArgumentError("role \"bot\": expected \"system\", \"user\" or \"assistant\""));
  for (const Role role : {Role::kSystem, Role::kUser, Role::kAssistant}) EXPECT_EQ(*ParseRole(RoleName(role)), role);
}

}  // namespace
}  // namespace llama
