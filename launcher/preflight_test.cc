// What the launcher finds before converting: each check that needs no
// weights, with the message the user gets.

#include "launcher/preflight.h"

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::EditedFixtureModel;
using ::llama::testing::TokenizerFixturePath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The fixture's tokenizer (600 pieces) and a model of its vocabulary.
PreflightModel FixtureModel() { return {"/data/tiny", 600, TokenizerFixturePath("tokenizer.model"), 4096}; }

JobFlags Prompt(const std::string& prompt) {
  JobFlags flags;
  flags.prompt = prompt;
  flags.max_gen_len = 4;
  return flags;
}

TEST(PreflightTest, TheTokenizerMustHaveTheModelsVocabulary) {
  PreflightModel model = FixtureModel();
  model.vocab_size = 32000;
  std::vector<std::string> warnings;
  EXPECT_EQ(CheckJobInputs(model, Prompt("Hello"), &warnings).message(),
            "the tokenizer " + model.tokenizer_path +
                " has 600 tokens but the model in /data/tiny has a vocabulary of 32000; use the checkpoint's own "
                "tokenizer (--tokenizer_path)");
  EXPECT_TRUE(CheckJobInputs(FixtureModel(), Prompt("Hello"), &warnings).ok());
  EXPECT_THAT(warnings, IsEmpty());
}

// --draft_ckpt_dir: a draft of the model's vocabulary size whose tokenizer
// is the model's passes; another size, another tokenizer of the same size
// (one token's text changed) or an unreadable tokenizer is refused naming
// the flag; no tokenizer file leaves a warning.
TEST(PreflightTest, ADraftMustSpeakTheModelsTokenizer) {
  const PreflightModel model = FixtureModel();
  PreflightModel draft = model;
  draft.ckpt_dir = "/data/draft";
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckDraftModel(model, draft, &warnings).ok());
  EXPECT_THAT(warnings, IsEmpty());

  draft.vocab_size = 32000;
  EXPECT_EQ(CheckDraftModel(model, draft, &warnings).message(),
            "--draft_ckpt_dir=/data/draft: the draft's vocabulary has 32000 tokens, the model's 600; a draft must "
            "speak the model's tokenizer");
  draft.vocab_size = 600;

  draft.tokenizer_path = TempFile("other.model", EditedFixtureModel([](SentencePieceSpec& spec) {
                                    spec.pieces[300].text = "\u2581draftonly";
                                  }));
  const absl::Status other = CheckDraftModel(model, draft, &warnings);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.message()),
              HasSubstr("--draft_ckpt_dir=/data/draft: its tokenizer " + draft.tokenizer_path +
                        " is not the model's (" + model.tokenizer_path + "): token 300 is"));

  draft.tokenizer_path = TempFile("garbage.model", "not a tokenizer");
  EXPECT_THAT(std::string(CheckDraftModel(model, draft, &warnings).message()),
              HasSubstr("--draft_ckpt_dir=/data/draft: "));

  draft.tokenizer_path.clear();
  EXPECT_TRUE(CheckDraftModel(model, draft, &warnings).ok());
  EXPECT_THAT(warnings, ElementsAre("--draft_ckpt_dir=/data/draft has no tokenizer file; only its vocabulary's size "
                                    "(600) was checked against the model's"));
}

TEST(PreflightTest, APromptLongerThanMaxSeqLen) {
  JobFlags flags = Prompt("Hello world, this is far too long for the context");
  flags.max_seq_len = 4;
  flags.max_gen_len = 2;
  std::vector<std::string> warnings;
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(),
              HasSubstr("--prompt: nothing can run: prompt 0 has "));
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(), HasSubstr("more than --max_seq_len=4"));
  // One of two: the other runs, so the long one is a warning.
  flags.prompt.clear();
  flags.prompts_file = TempFile("prompts.json", R"(["Hi", "Hello world, this is far too long for the context"])");
  ASSERT_TRUE(CheckJobInputs(FixtureModel(), flags, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("--prompts_file " + flags.prompts_file + ": prompt 1 has "));
  EXPECT_THAT(warnings[0], HasSubstr("it gets an error record, the others run"));
}

TEST(PreflightTest, DialogRolesAreTheChatFormats) {
  JobFlags flags;
  flags.max_gen_len = 4;
  flags.dialogs_file = TempFile("dialogs.json", R"([[{"role": "assistant", "content": "I speak first"}]])");
  std::vector<std::string> warnings;
  const absl::Status status = CheckJobInputs(FixtureModel(), flags, &warnings);
  EXPECT_THAT(status.message(), HasSubstr("--dialogs_file " + flags.dialogs_file + ": nothing can run: dialog 0: "));
}

// An --output that names a folder is refused before the checkpoint is
// converted, not when the first answer is due.
TEST(PreflightTest, AnOutputThatIsAFolder) {
  std::vector<std::string> warnings;
  JobFlags flags = Prompt("Hello");
  flags.output = std::getenv("TEST_TMPDIR");
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(), HasSubstr("is not a file (a folder?)"));
  flags.output += "/answers.jsonl";
  EXPECT_TRUE(CheckJobInputs(FixtureModel(), flags, &warnings).ok());
}

TEST(PreflightTest, ALogFolderThatCannotBeMade) {
  const std::string file = TempFile("a_file", "x");
  EXPECT_THAT(CheckLogFolder(file + "/logs").message(), HasSubstr("--log_dir: cannot create \"" + file + "/logs\""));
  EXPECT_TRUE(CheckLogFolder(std::string(std::getenv("TEST_TMPDIR")) + "/logs/run1").ok());
}

// --json_schema is compiled before anything is converted: a file that is
// not there, not JSON, or holds a keyword we cannot compile is an error
// naming the flag and the file; a server refuses the flag.
TEST(PreflightTest, JsonSchemaIsCompiledBeforeConverting) {
  std::vector<std::string> warnings;
  JobFlags flags = Prompt("Hello");
  flags.json_schema = "/nonexistent/schema.json";
  EXPECT_EQ(CheckJobInputs(FixtureModel(), flags, &warnings).message(),
            "--json_schema=/nonexistent/schema.json: cannot read the file");
  flags.json_schema = TempFile("not_json.json", "{\"type\": ");
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(), HasSubstr("not_json.json: not valid JSON"));
  flags.json_schema = TempFile("uncompilable.json", R"({"properties": {"a": {"not": {}}}})");
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(),
              HasSubstr("uncompilable.json: \"not\" at /properties/a is not supported"));
  flags.json_schema = TempFile("good.json", R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  EXPECT_TRUE(CheckJobInputs(FixtureModel(), flags, &warnings).ok());
  flags.prompt.clear();
  flags.serve = true;
  EXPECT_THAT(CheckJobInputs(FixtureModel(), flags, &warnings).message(),
              HasSubstr("a server takes a schema per request (response_format)"));
}

}  // namespace
}  // namespace llama
