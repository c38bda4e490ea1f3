#include "worker/serve/tool_calls.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/grammar/grammar.h"

namespace llama {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

ToolUse WeatherAndSearch() {
  ToolUse use;
  use.tools = {{"get_weather", "Weather of a city",
                ordered_json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                                        "required": ["city"]})")},
               {"brave_search", "", ordered_json()}};
  return use;
}

// The documented prompt (tokenizer/testdata, copied from llama-models'
// models/llama3_1/prompt_format.md) shows its function as FunctionDefinition
// renders the same OpenAI tool.
TEST(ToolCallsTest, FunctionDefinitionIsLaidOutAsTheDocumentedPrompt) {
  std::ifstream file("tokenizer/testdata/llama3_1_json_tool_prompt.txt", std::ios::binary);
  ASSERT_TRUE(file);
  const std::string prompt((std::istreambuf_iterator<char>(file)), {});
  const size_t begin = prompt.find("{\n");
  const std::string documented = prompt.substr(begin, prompt.find("}\n\nReturn") + 1 - begin);
  const FunctionTool tool{"trending_songs", "Returns the trending songs on a Music site",
                          ordered_json::parse(R"({"type": "object", "properties": [
                              {"n": {"type": "object", "description": "The number of songs to return"}},
                              {"genre": {"type": "object", "description": "The genre of the songs to return"}}],
                              "required": ["n"]})")};
  EXPECT_EQ(FunctionDefinition(tool), documented);
}

TEST(ToolCallsTest, ToolPromptSplitsBuiltinTools) {
  const ToolPrompt prompt = MakeToolPrompt(WeatherAndSearch(), "21 September 2024");
  EXPECT_EQ(prompt.builtin_tools, std::vector<std::string>{"brave_search"});
  ASSERT_EQ(prompt.function_definitions.size(), 1u);
  EXPECT_THAT(prompt.function_definitions[0], HasSubstr("\"name\": \"get_weather\""));
  EXPECT_EQ(prompt.today, "21 September 2024");
  EXPECT_TRUE(MakeToolPrompt(ToolUse(), "today").empty());
}

TEST(ToolCallsTest, CallsAreReadInTheFormsLlama31WritesThem) {
  const ToolUse use = WeatherAndSearch();
  struct Case {
    const char* text;
    const char* name;
    const char* arguments;
  };
  const Case calls[] = {
      {R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 2}})", "get_weather",
       R"({"city":"Paris","days":2})"},
      {" <|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {}}<|eom_id|>",
       "get_weather", "{}"},
      {"<|reserved_special_token_5|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}"
       "<|reserved_special_token_4|>",
       "get_weather", R"({"city":"Rome"})"},
      {R"(<|python_tag|>brave_search.call(query="latest price of 1oz gold"))", "brave_search",
       R"({"query":"latest price of 1oz gold"})"},
  };
  for (const Case& c : calls) {
    std::optional<ToolCall> call = ParseToolCall(use, c.text);
    ASSERT_TRUE(call.has_value()) << c.text;
    EXPECT_EQ(call->name, c.name);
    EXPECT_EQ(call->arguments, c.arguments);
  }
  for (const char* text : {"Hello", R"({"name": "unknown", "parameters": {}})",
                           R"({"name": "get_weather", "parameters": 3})", "{\"name\": \"get_weather\"",
                           "<|python_tag|>print(1)"}) {
    EXPECT_FALSE(ParseToolCall(use, text).has_value()) << text;
  }
  ToolUse code = use;
  code.tools.push_back({"code_interpreter", "", ordered_json()});
  std::optional<ToolCall> call = ParseToolCall(code, "<|python_tag|>print(1)<|eom_id|>");
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "code_interpreter");
  EXPECT_EQ(call->arguments, R"j({"code":"print(1)"})j");
}

TEST(ToolCallsTest, StreamHoldsBackOnlyWhatMayBeACall) {
  const ToolUse use = WeatherAndSearch();
  ToolCallStream text(&use);
  EXPECT_EQ(text.Push(" "), "");
  EXPECT_EQ(text.Push("Hi"), " Hi");
  EXPECT_EQ(text.Push(" {there}<|eom_id|>"), " {there}");
  std::string rest;
  EXPECT_FALSE(text.Finish(&rest).has_value());
  EXPECT_EQ(rest, "");

  ToolCallStream call(&use);
  for (const char* piece : {"<|python_tag|>", "{\"name\": \"get_", "weather\", \"parameters\": {}}", "<|eom_id|>"}) {
    EXPECT_EQ(call.Push(piece), "");
  }
  std::optional<ToolCall> made = call.Finish(&rest);
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->name, "get_weather");

  ToolCallStream almost(&use);
  EXPECT_EQ(almost.Push("{\"a\": 1}"), "");
  EXPECT_FALSE(almost.Finish(&rest).has_value());
  EXPECT_EQ(rest, "{\"a\": 1}");  // Not a call after all: the text, at the end.
}

TEST(ToolCallsTest, ForcedCallGrammarHoldsTheCallToTheToolsSchema) {
  ToolUse use = WeatherAndSearch();
  use.choice = ToolChoice::kRequired;
  std::string param;
  absl::StatusOr<std::string> gbnf = ForcedCallGbnf(use, &param);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> any = grammar::Grammar::Parse(*gbnf);
  ASSERT_TRUE(any.ok()) << any.status() << "\n" << *gbnf;
  EXPECT_TRUE((*any)->Accepts(R"({"name":"get_weather","parameters":{"city":"Paris"}})"));
  EXPECT_TRUE((*any)->Accepts(R"({"name":"brave_search","parameters":{"query":"x"}})"));
  EXPECT_FALSE((*any)->Accepts(R"({"name":"get_weather","parameters":{}})"));  // "city" is required.
  EXPECT_FALSE((*any)->Accepts(R"({"name":"other","parameters":{}})"));

  use.choice = ToolChoice::kNamed;
  use.named = "brave_search";
  absl::StatusOr<std::string> named = ForcedCallGbnf(use, &param);
  ASSERT_TRUE(named.ok()) << named.status();
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> one = grammar::Grammar::Parse(*named);
  ASSERT_TRUE(one.ok()) << one.status();
  // A built-in tool without a schema takes its one argument.
  EXPECT_TRUE((*one)->Accepts(R"({"name":"brave_search","parameters":{"query":"gold"}})"));
  EXPECT_FALSE((*one)->Accepts(R"({"name":"brave_search","parameters":{}})"));
  EXPECT_FALSE((*one)->Accepts(R"({"name":"get_weather","parameters":{"city":"Paris"}})"));

  use.tools[1].parameters = ordered_json::parse(R"({"type": "object", "properties": {"q": {"not": {}}}})");
  absl::StatusOr<std::string> refused = ForcedCallGbnf(use, &param);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("\"not\""));
  EXPECT_EQ(param, "tools[1].function.parameters");
}

}  // namespace
}  // namespace llama
