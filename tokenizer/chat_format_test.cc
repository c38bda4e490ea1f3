#include "tokenizer/chat_format.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::FixtureTokenizer;
using ::testing::HasSubstr;

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
