// OpenAI's legacy logprobs as clients rebuild text from them: a choice's
// tokens join to its text ("bytes:\xNN" tokens, pieces of a character,
// joined as bytes), text_offset is each token's start in it, and chat's
// `bytes` lists join to the message's UTF-8. On both tokenizers (Llama 2's
// SentencePiece, Llama 3's tiktoken) and the tokenizer tests' awkward
// strings: whitespace runs, CJK, emoji, byte fallback, combining marks.

#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "tokenizer/utf8.h"
#include "worker/serve/serving_fixture.h"

namespace llama::testing {
namespace {

// A token field's bytes: "bytes:" then \xNN escapes, or the text itself.
std::string TokenBytes(const std::string& token) {
  if (!absl::StartsWith(token, "bytes:")) return token;
  std::string bytes;
  for (size_t i = 6; i < token.size(); i += 4) {
    int byte = -1;
    EXPECT_TRUE(token.compare(i, 2, "\\x") == 0 && absl::SimpleHexAtoi(token.substr(i + 2, 2), &byte)) << token;
    bytes.push_back(static_cast<char>(byte));
  }
  return bytes;
}

std::string JoinedBytes(const json& tokens) {
  std::string joined;
  for (const json& t : tokens) joined += TokenBytes(t.get<std::string>());
  return joined;
}

// Text with every run of U+FFFD as one: the random models write invalid
// UTF-8, which SentencePiece's decoder replaces byte by byte and Python's
// (our tiktoken Decode, SanitizeUtf8) by maximal subpart.
std::string OneReplacementPerRun(const std::string& text) {
  static const std::string kReplacement = "\xef\xbf\xbd";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, kReplacement) == 0) {
      if (!absl::EndsWith(out, kReplacement)) out += kReplacement;
      i += 3;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// The tokenizer tests' strings that are UTF-8 (a JSON prompt is text), the
// fixture dialogs' messages, and more scripts.
std::vector<std::string> Prompts() {
  std::vector<std::string> prompts = {
      "The capital of France is",
      "\xe7\x8c\xab\xe3\x81\x8c\xe5\xa5\xbd\xe3\x81\x8d",                   // 猫が好き: byte fallback.
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa6 family",  // ZWJ sequence.
      "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xd8\xa8\xd8\xa7\xd9\x84\xd8\xb9\xd8\xa7\xd9\x84\xd9\x85",  // Arabic.
      "\xce\x93\xce\xb5\xce\xb9\xce\xac \xcf\x83\xce\xbf\xcf\x85 \xce\xba\xcf\x8c\xcf\x83\xce\xbc\xce\xb5",  // Greek.
      "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xed\x85\x8d\xec\x8a\xa4\xed\x8a\xb8",  // Korean.
      "  leading and trailing spaces  ",
      "tabs\tand\nnew\nlines\n",
      "x",
      "\xf0\x9f\xa6\x99",
      "a \xf0\x9f\x9a\x80 b \xf0\x9f\x99\x82 c",
      "\xe2\x82\xac 12.50, \xc2\xa3 3, \xc2\xa5 700",
  };
  for (const json& row : ReadGolden("encode_golden.json")) {
    const std::string text = DecodeBase64Field(row, "text_b64");
    if (SanitizeUtf8(text) != text) continue;
    if (std::find(prompts.begin(), prompts.end(), text) == prompts.end()) prompts.push_back(text);
  }
  std::ifstream dialogs("tests/fixtures/dialogs.json");
  EXPECT_TRUE(dialogs) << "HINT: the test needs //tests/fixtures:dialogs.json as data";
  for (const json& dialog : json::parse(dialogs, nullptr, /*allow_exceptions=*/false)) {
    for (const json& message : dialog) prompts.push_back(message["content"]);
  }
  return prompts;
}

// Each token's offset is where its bytes start in the joined text.
void ExpectOffsetsAtEachToken(const json& logprobs, int64_t start) {
  int64_t offset = start;
  for (size_t j = 0; j < logprobs["tokens"].size(); ++j) {
    EXPECT_EQ(logprobs["text_offset"][j], offset) << j;
    offset += TokenBytes(logprobs["tokens"][j]).size();
  }
}

class LogprobTokensTest : public ::testing::TestWithParam<std::string> {};

// Echo with logprobs and max_tokens 0: the prompt alone, scored, its tokens
// joining to it, the top token and the actual one at each position after
// the first.
TEST_P(LogprobTokensTest, EchoedTokensJoinToThePrompt) {
  Serving s({}, {}, GetParam(), /*context=*/4096);  // The longest prompt: 3603 tokens.
  const std::vector<std::string> prompts = Prompts();
  ASSERT_GE(prompts.size(), 50u);
  const json answer = s.PostJson("/v1/completions", {{"model", "tiny"},
                                                     {"prompt", prompts},
                                                     {"echo", true},
                                                     {"logprobs", 1},
                                                     {"max_tokens", 0},
                                                     {"temperature", 0}});
  ASSERT_EQ(answer["choices"].size(), prompts.size()) << answer.dump();
  EXPECT_EQ(answer["usage"]["completion_tokens"], 0);
  for (const json& choice : answer["choices"]) {
    const std::string& prompt = prompts[choice["index"].get<size_t>()];
    SCOPED_TRACE("prompt \"" + prompt + "\"");
    const json& logprobs = choice["logprobs"];
    EXPECT_EQ(choice["text"], prompt);
    EXPECT_EQ(JoinedBytes(logprobs["tokens"]), prompt) << logprobs["tokens"].dump();
    ExpectOffsetsAtEachToken(logprobs, 0);
    const size_t n = logprobs["tokens"].size();
    ASSERT_EQ(logprobs["token_logprobs"].size(), n);
    ASSERT_EQ(logprobs["top_logprobs"].size(), n);
    EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
    EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
    for (size_t j = 1; j < n; ++j) {
      const json& top = logprobs["top_logprobs"][j];
      ASSERT_TRUE(top.is_object()) << j;
      EXPECT_GE(top.size(), 1u);  // The actual token is the top one, or another is.
      EXPECT_LE(top.size(), 2u);
      EXPECT_EQ(top[logprobs["tokens"][j].get<std::string>()], logprobs["token_logprobs"][j]) << j;
      for (const auto& [name, logprob] : top.items()) {
        EXPECT_GE(logprob.get<double>(), logprobs["token_logprobs"][j].get<double>()) << name;
      }
    }
  }
}

// Generated tokens are spelled as the generated text is decoded: alone,
// so they join to it; with echo they follow the prompt's.
TEST_P(LogprobTokensTest, GeneratedTokensJoinToTheText) {
  Serving s({}, {}, GetParam());
  const std::vector<std::string> prompts = {"The capital of France is", "\xe7\x8c\xab", " hello", "\xf0\x9f\xa6\x99"};
  for (const bool echo : {false, true}) {
    const json answer = s.PostJson("/v1/completions", {{"model", "tiny"},
                                                       {"prompt", prompts},
                                                       {"echo", echo},
                                                       {"logprobs", 2},
                                                       {"max_tokens", 24},
                                                       {"temperature", 0}});
    for (const json& choice : answer["choices"]) {
      const std::string& prompt = prompts[choice["index"].get<size_t>()];
      SCOPED_TRACE("prompt \"" + prompt + "\", echo " + std::to_string(echo));
      const json& logprobs = choice["logprobs"];
      ASSERT_GT(logprobs["tokens"].size(), 0u);
      if (!echo) {
        EXPECT_LE(logprobs["tokens"].size(), 24u);
      }
      EXPECT_EQ(OneReplacementPerRun(SanitizeUtf8(JoinedBytes(logprobs["tokens"]))),
                OneReplacementPerRun(choice["text"]))
          << logprobs["tokens"].dump();
      ExpectOffsetsAtEachToken(logprobs, 0);
      if (echo) {
        EXPECT_TRUE(absl::StartsWith(choice["text"].get<std::string>(), prompt));
      }
    }
  }
}

// Echoed, the text is the decode of the prompt and the answer together (as
// /detokenize of their ids gives it): the answer's first word keeps the
// space it has after the prompt, in the text and in its token.
TEST_P(LogprobTokensTest, AnEchoedAnswerIsDecodedAfterThePrompt) {
  Serving s({}, {}, GetParam());
  for (const std::string prompt : {"The capital of France is", "x", "\xe7\x8c\xab"}) {
    SCOPED_TRACE("prompt \"" + prompt + "\"");
    json request = {{"model", "tiny"}, {"prompt", prompt}, {"echo", true},     {"logprobs", 0},
                    {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
    const json named = s.PostJson("/v1/completions", request)["choices"][0];
    request["return_tokens_as_token_ids"] = true;
    const json by_id = s.PostJson("/v1/completions", request)["choices"][0];
    std::vector<int> ids;
    for (const json& token : by_id["logprobs"]["tokens"]) {
      ids.push_back(std::stoi(token.get<std::string>().substr(std::string("token_id:").size())));
    }
    ASSERT_GT(ids.size(), 8u) << by_id.dump();
    // The BOS the server added leads the ids; the echo shows it as nothing.
    ids.erase(ids.begin());
    const json decoded = s.PostJson("/detokenize", {{"model", "tiny"}, {"tokens", ids}});
    EXPECT_EQ(named["text"], decoded["prompt"]);
    EXPECT_EQ(OneReplacementPerRun(SanitizeUtf8(JoinedBytes(named["logprobs"]["tokens"]))),
              OneReplacementPerRun(named["text"]));
  }
}

// A grammar makes the model write characters that its vocabulary spells in
// byte tokens: each such token is "bytes:" and its bytes, and the pieces
// join to the text, in completions and in chat (whose `bytes` lists join
// to the message's UTF-8, the alternatives' to their tokens' bytes).
TEST_P(LogprobTokensTest, PiecesOfCharactersAreBytes) {
  Serving s({}, {}, GetParam());
  const std::string answer_text = "\xe7\x8c\xab \xea\xb3\xa0\xec\x96\x91\xec\x9d\xb4 \xf0\x9f\x90\x88";  // 猫 고양이 🐈
  const json completion = s.PostJson("/v1/completions", {{"model", "tiny"},
                                                         {"prompt", "Cat:"},
                                                         {"logprobs", 1},
                                                         {"max_tokens", 40},
                                                         {"seed", 1},
                                                         {"guided_choice", {answer_text}}});
  const json& logprobs = completion["choices"][0]["logprobs"];
  EXPECT_EQ(completion["choices"][0]["text"], answer_text);
  EXPECT_EQ(JoinedBytes(logprobs["tokens"]), answer_text) << logprobs["tokens"].dump();
  EXPECT_THAT(logprobs["tokens"].get<std::vector<std::string>>(), ::testing::Contains(::testing::StartsWith("bytes:\\x")));
  ExpectOffsetsAtEachToken(logprobs, 0);

  const json chat = s.PostJson("/v1/chat/completions", {{"model", "tiny"},
                                                        {"messages", {{{"role", "user"}, {"content", "Cat?"}}}},
                                                        {"logprobs", true},
                                                        {"top_logprobs", 2},
                                                        {"max_tokens", 40},
                                                        {"seed", 1},
                                                        {"guided_choice", {answer_text}}});
  EXPECT_EQ(chat["choices"][0]["message"]["content"], answer_text);
  std::string joined;
  int pieces = 0;
  for (const json& token : chat["choices"][0]["logprobs"]["content"]) {
    const std::vector<uint8_t> bytes = token["bytes"].get<std::vector<uint8_t>>();
    const std::string own(bytes.begin(), bytes.end());
    EXPECT_EQ(TokenBytes(token["token"]), own) << token.dump();
    pieces += absl::StartsWith(token["token"].get<std::string>(), "bytes:");
    joined += own;
    ASSERT_EQ(token["top_logprobs"].size(), 2u);
    for (const json& alternative : token["top_logprobs"]) {
      const std::vector<uint8_t> alternative_bytes = alternative["bytes"].get<std::vector<uint8_t>>();
      EXPECT_EQ(TokenBytes(alternative["token"]), std::string(alternative_bytes.begin(), alternative_bytes.end()));
    }
  }
  EXPECT_EQ(joined, answer_text);
  EXPECT_GT(pieces, 0);
}

// Chat without a grammar: whatever the random model writes, its tokens'
// bytes join to the message.
TEST_P(LogprobTokensTest, ChatBytesJoinToTheMessage) {
  Serving s({}, {}, GetParam());
  for (const std::string prompt : {"Hi", "\xe7\x8c\xab?", "Tell me about Paris."}) {
    const json chat = s.PostJson("/v1/chat/completions", {{"model", "tiny"},
                                                          {"messages", {{{"role", "user"}, {"content", prompt}}}},
                                                          {"logprobs", true},
                                                          {"max_tokens", 24},
                                                          {"temperature", 0}});
    std::string joined;
    for (const json& token : chat["choices"][0]["logprobs"]["content"]) {
      const std::vector<uint8_t> bytes = token["bytes"].get<std::vector<uint8_t>>();
      joined += std::string(bytes.begin(), bytes.end());
      EXPECT_EQ(TokenBytes(token["token"]), std::string(bytes.begin(), bytes.end()));
    }
    EXPECT_EQ(OneReplacementPerRun(SanitizeUtf8(joined)),
              OneReplacementPerRun(chat["choices"][0]["message"]["content"]))
        << chat.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(BothTokenizers, LogprobTokensTest, ::testing::Values(kLlama2Model, kLlama3Model));

}  // namespace
}  // namespace llama::testing
