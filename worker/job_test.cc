#include "worker/job.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

TEST(JobTest, RoundTripsPromptsAndDialogs) {
  Job job;
  job.prompts = {"I believe the meaning of life is", "ünïcödé \"quoted\""};
  absl::StatusOr<Job> back = DeserializeJob(SerializeJob(job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->chat);
  EXPECT_EQ(back->prompts, job.prompts);

  Job chat;
  chat.chat = true;
  chat.dialogs = {{{Role::kSystem, "Be brief."}, {Role::kUser, "Hi"}}};
  back = DeserializeJob(SerializeJob(chat));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->dialogs.size(), 1u);
  EXPECT_EQ(back->dialogs[0][1].content, "Hi");
  EXPECT_EQ(back->dialogs[0][0].role, Role::kSystem);
}

// Malformed messages are errors naming the field, never exceptions.
TEST(JobTest, MalformedMessagesAreErrorsNotThrows) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"not json", "job description from rank 0: not a JSON object"},
      {"[1, 2]", "job description from rank 0: not a JSON object"},
      {R"({"prompts": [], "dialogs": []})", "job description from rank 0: \"chat\" is missing or not true/false"},
      {R"({"chat": "yes", "prompts": [], "dialogs": []})",
       "job description from rank 0: \"chat\" is missing or not true/false"},
      {R"({"chat": false, "prompts": "hi", "dialogs": []})",
       "job description from rank 0: \"prompts\" is missing or not an array"},
      {R"({"chat": false, "prompts": ["a", 3], "dialogs": []})",
       "job description from rank 0: prompts[1] is not a string"},
      {R"({"chat": false, "prompts": []})", "job description from rank 0: \"dialogs\" is missing or not an array"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<Job> job = DeserializeJob(c.text);
    ASSERT_FALSE(job.ok()) << c.text;
    EXPECT_EQ(job.status().message(), c.message) << c.text;
  }
  EXPECT_FALSE(DeserializeJob(R"({"chat": true, "prompts": [], "dialogs": [[{"role": 5}]]})").ok());
}

TEST(JobTest, ExactlyOneSource) {
  EXPECT_EQ(ReadJob("", "", "").status().message(), "give exactly one of --prompt, --prompts_file, --dialogs_file");
  EXPECT_FALSE(ReadJob("a", "b.json", "").ok());
  absl::StatusOr<Job> one = ReadJob("a prompt", "", "");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompts, std::vector<std::string>{"a prompt"});
}

// A --prompt of bytes that are not UTF-8 (a Latin-1 shell) is refused by
// name, not carried into JSON where it would abort the worker.
TEST(JobTest, APromptMustBeUtf8) {
  EXPECT_EQ(ReadJob("caf\xe9", "", "").status().message(), "--prompt: byte 3 is not UTF-8; expected text in UTF-8");
  EXPECT_TRUE(ReadJob("caf\xc3\xa9 \xf0\x9f\x90\x88", "", "").ok());
}

}  // namespace
}  // namespace llama
