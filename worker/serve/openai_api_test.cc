// Request parsing of the structured-output and tool fields, and the
// responses' tool calls (the rest of the API is tested over HTTP in
// api_server_test).

#include "worker/serve/openai_api.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema.h"
#include "worker/grammar/regex_to_gbnf.h"

namespace llama {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

json Chat(const json& fields) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(fields);
  return body;
}

ApiError ChatError(const json& fields) {
  ChatRequest request;
  ApiError error;
  EXPECT_FALSE(ParseChatRequest(Chat(fields).dump(), &request, &error)) << fields.dump();
  return error;
}

std::string ChatGrammar(const std::string& body) {
  ChatRequest request;
  ApiError error;
  EXPECT_TRUE(ParseChatRequest(body, &request, &error)) << error.message;
  return request.params.grammar;
}

bool Accepts(const std::string& gbnf, const std::string& text) {
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> g = grammar::Grammar::Parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() && (*g)->Accepts(text);
}

TEST(OpenAiApiTest, EachConstraintFieldBecomesTheGrammar) {
  // The schema's properties keep the order the client wrote them in.
  const std::string schema = R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"enum": ["x"]}},
                                 "required": ["b", "a"]})";
  const std::string from_schema = *grammar::JsonSchemaToGbnf(ordered_json::parse(schema));
  const std::string head = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], )";
  EXPECT_EQ(ChatGrammar(head + R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": )" +
                        schema + R"(, "strict": true}}})"),
            from_schema);
  EXPECT_TRUE(Accepts(from_schema, R"({"b":1,"a":"x"})"));
  EXPECT_EQ(ChatGrammar(head + R"("guided_json": )" + schema + "}"), from_schema);
  EXPECT_EQ(ChatGrammar(head + R"("guided_json": )" + json(schema).dump() + "}"), from_schema);
  EXPECT_EQ(ChatGrammar(head + R"("json_schema": )" + schema + "}"), from_schema);
  EXPECT_EQ(ChatGrammar(head + R"("response_format": {"type": "json_object"}})"), grammar::JsonObjectGbnf());
  EXPECT_EQ(ChatGrammar(head + R"("response_format": {"type": "text"}})"), "");
  EXPECT_EQ(ChatGrammar(head + R"("guided_regex": "[ab]+"})"), *grammar::RegexToGbnf("[ab]+"));
  EXPECT_EQ(ChatGrammar(head + R"("guided_choice": ["yes", "no"]})"), grammar::ChoiceGbnf({"yes", "no"}));
  EXPECT_EQ(ChatGrammar(head + R"("guided_grammar": "root ::= \"a\""})"), "root ::= \"a\"");
  EXPECT_EQ(ChatGrammar(head + R"("grammar": "root ::= \"a\""})"), "root ::= \"a\"");
  EXPECT_EQ(ChatGrammar(head + R"("grammar": ""})"), "");
  // Completions take them too.
  CompletionRequest completion;
  ApiError error;
  ASSERT_TRUE(ParseCompletionRequest(R"({"model": "m", "prompt": "p", "guided_choice": ["a"]})", &completion, &error));
  EXPECT_EQ(completion.params.grammar, grammar::ChoiceGbnf({"a"}));
}

TEST(OpenAiApiTest, ConstraintErrorsNameTheField) {
  const json not_schema = {{"type", "object"}, {"properties", {{"a", {{"not", {{"pattern", "^x"}}}}}}}};
  ApiError e = ChatError({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", not_schema}}}}}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format.json_schema.schema");
  EXPECT_THAT(e.message, HasSubstr("\"not\" at /properties/a"));
  EXPECT_EQ(ChatError({{"guided_json", not_schema}}).param, "guided_json");
  EXPECT_EQ(ChatError({{"json_schema", not_schema}}).param, "json_schema");
  EXPECT_EQ(ChatError({{"guided_json", "{"}}).message, "guided_json: not valid JSON");
  e = ChatError({{"guided_regex", "(a"}});
  EXPECT_EQ(e.param, "guided_regex");
  e = ChatError({{"guided_grammar", "root ::= ("}});
  EXPECT_EQ(e.param, "guided_grammar");
  EXPECT_THAT(e.message, HasSubstr("not a grammar: "));
  EXPECT_EQ(ChatError({{"grammar", "start ::= \"a\""}}).param, "grammar");
  EXPECT_EQ(ChatError({{"guided_choice", json::array()}}).param, "guided_choice");
  EXPECT_EQ(ChatError({{"response_format", {{"type", "yaml"}}}}).param, "response_format.type");
  EXPECT_EQ(ChatError({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}}}}}}).message,
            "response_format.json_schema.schema: required");
  // Two at once: a 400 naming both.
  e = ChatError({{"response_format", {{"type", "json_object"}}}, {"guided_regex", "a"}});
  EXPECT_EQ(e.message, "guided_regex: response_format and guided_regex both constrain the answer: give one of them");
}

json WeatherTool() {
  return json::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})");
}

TEST(OpenAiApiTest, ToolsAndToolChoice) {
  ChatRequest request;
  ApiError error;
  ASSERT_TRUE(ParseChatRequest(Chat({{"tools", {WeatherTool()}}}).dump(), &request, &error)) << error.message;
  ASSERT_EQ(request.params.tools.tools.size(), 1u);
  EXPECT_EQ(request.params.tools.tools[0].name, "get_weather");
  EXPECT_EQ(request.params.tools.choice, ToolChoice::kAuto);  // OpenAI's default with tools.
  EXPECT_TRUE(request.params.grammar.empty());
  EXPECT_TRUE(request.params.tools.active());

  for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
    ChatRequest forced;
    ASSERT_TRUE(ParseChatRequest(Chat({{"tools", {WeatherTool()}}, {"tool_choice", choice}}).dump(), &forced, &error))
        << error.message;
    EXPECT_TRUE(Accepts(forced.params.grammar, R"({"name":"get_weather","parameters":{"city":"Paris"}})"));
  }
  ChatRequest none;
  ASSERT_TRUE(ParseChatRequest(Chat({{"tools", {WeatherTool()}}, {"tool_choice", "none"}}).dump(), &none, &error));
  EXPECT_FALSE(none.params.tools.active());

  EXPECT_EQ(ChatError({{"tool_choice", "required"}}).message, "tool_choice: needs tools");
  EXPECT_EQ(ChatError({{"tools", {WeatherTool()}}, {"tool_choice", "sometimes"}}).param, "tool_choice");
  const json named_f = {{"type", "function"}, {"function", {{"name", "f"}}}};
  EXPECT_THAT(ChatError({{"tools", {WeatherTool()}}, {"tool_choice", named_f}}).message,
              HasSubstr("names \"f\", which is not among the tools"));
  EXPECT_EQ(ChatError({{"tools", {WeatherTool(), WeatherTool()}}}).param, "tools[1].function.name");
  EXPECT_EQ(ChatError({{"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}}).param,
            "tools[0].function.name");
  EXPECT_EQ(ChatError({{"tools", {{{"type", "retrieval"}}}}}).param, "tools[0]");
  EXPECT_THAT(ChatError({{"tools", {WeatherTool()}}, {"tool_choice", "required"}, {"guided_regex", "a"}}).message,
              HasSubstr("a required call and guided_regex both constrain the answer"));
  json refused = WeatherTool();
  refused["function"]["parameters"] = {{"not", json::object()}};
  ApiError e = ChatError({{"tools", {refused}}, {"tool_choice", "required"}});
  EXPECT_EQ(e.param, "tools[0].function.parameters");
  EXPECT_THAT(e.message, HasSubstr("\"not\""));

  CompletionRequest completion;
  EXPECT_TRUE(ParseCompletionRequest(R"({"model": "m", "prompt": "p", "tools": []})", &completion, &error));
  EXPECT_FALSE(ParseCompletionRequest(Chat({{"prompt", "p"}, {"tools", {WeatherTool()}}}).dump(), &completion, &error));
  EXPECT_EQ(error.message, "tools: only chat completions take tools");
}

TEST(OpenAiApiTest, ToolMessagesAndAssistantCalls) {
  const json messages = json::parse(R"([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call-1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call-1", "content": "21C"}])");
  ChatRequest request;
  ApiError error;
  ASSERT_TRUE(ParseChatRequest(Chat({{"messages", messages}}).dump(), &request, &error)) << error.message;
  ASSERT_EQ(request.messages.size(), 3u);
  ASSERT_EQ(request.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(request.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(request.messages[1].tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(request.messages[2].role, Role::kTool);
  EXPECT_EQ(request.messages[2].content, "21C");

  json bad = messages;
  bad[1]["tool_calls"][0]["function"]["arguments"] = "[1]";
  EXPECT_EQ(ChatError({{"messages", bad}}).param, "messages[1].tool_calls[0].function.arguments");
  bad = messages;
  bad[0]["tool_calls"] = messages[1]["tool_calls"];
  EXPECT_EQ(ChatError({{"messages", bad}}).message, "messages[0].tool_calls: only an assistant's message");
  EXPECT_EQ(ChatError({{"messages", {{{"role", "bot"}, {"content", "x"}}}}}).message,
            "messages[0].role: \"bot\": expected \"system\", \"user\", \"assistant\" or \"tool\"");
}

TEST(OpenAiApiTest, ToolCallsInResponsesAndChunks) {
  ChoiceResult called;
  called.finish_reason = "tool_calls";
  called.tool_calls = {{"call-1", "get_weather", R"({"city":"Paris"})"}};
  const json response = ChatResponse("id", 1, "m", {called}, false, {});
  const json& message = response["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"], json::parse(R"([{"id": "call-1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}])"));
  EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
  const json chunk = ChatChunk("id", 1, "m", 0, called, false, false);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
}

// Whole characters stay text; a piece of one is "bytes:" and \xNN per byte.
TEST(OpenAiApiTest, TokenFieldWritesPiecesOfCharactersAsBytes) {
  EXPECT_EQ(TokenField(" the"), " the");
  EXPECT_EQ(TokenField("\xe7\x8c\xab"), "\xe7\x8c\xab");
  EXPECT_EQ(TokenField(""), "");
  EXPECT_EQ(TokenField("\xe6\x9d"), "bytes:\\xe6\\x9d");
  EXPECT_EQ(TokenField(" \xe6"), "bytes:\\x20\\xe6");
}

}  // namespace
}  // namespace llama
