#include "worker/results.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace llama {
namespace {

Completion Sample() {
  Completion c;
  c.generation = " Paris \"quoted\"";
  c.token_ids = {3, 4};
  c.tokens = {" Paris", " \"quoted\""};
  c.logprobs = {-0.5f, -1.25f};
  return c;
}

TEST(ResultsTest, TextAsTheReferenceScriptPrintsIt) {
  EXPECT_EQ(FormatTextCompletion("The capital of France is", Sample()),
            "The capital of France is\n>  Paris \"quoted\"\n\n==================================\n\n");
}

TEST(ResultsTest, ChatAsTheReferenceScriptPrintsIt) {
  const Dialog dialog = {{Role::kSystem, "Be brief"}, {Role::kUser, "Capital?"}};
  EXPECT_EQ(FormatChatCompletion(dialog, Sample()),
            "System: Be brief\n\nUser: Capital?\n\n> Assistant:  Paris \"quoted\"\n\n==================================\n\n");
}

TEST(ResultsTest, JsonShapes) {
  EXPECT_EQ(CompletionJson(Sample(), false, false), R"({"generation":" Paris \"quoted\"","token_ids":[3,4]})");
  EXPECT_EQ(CompletionJson(Sample(), true, true),
            R"({"generation":{"role":"assistant","content":" Paris \"quoted\""},"token_ids":[3,4],)"
            R"("tokens":[" Paris"," \"quoted\""],"logprobs":[-0.5,-1.25]})");
  Completion bad = Sample();
  bad.generation = "\xff";
  EXPECT_EQ(CompletionJson(bad, false, false), "{\"generation\":\"\xEF\xBF\xBD\",\"token_ids\":[3,4]}");
}

TEST(ResultsTest, WritesAtomically) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/out.jsonl";
  ASSERT_TRUE(WriteLinesAtomically(path, {"a", "b"}).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "a\nb\n");
  EXPECT_FALSE(WriteLinesAtomically("/nonexistent/dir/out.jsonl", {"a"}).ok());
}

// Created empty (an earlier run's lines go), then each batch's lines are
// on disk as soon as Append returns, whatever happens to the job after.
TEST(ResultsTest, ResultsFileKeepsEachBatch) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/results.jsonl";
  std::ofstream(path) << "{\"stale\": true}\n";
  absl::StatusOr<std::unique_ptr<ResultsFile>> file = ResultsFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const auto read = [&] {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_EQ(read(), "");
  ASSERT_TRUE((*file)->Append({"{\"a\": 1}", "{\"b\": 2}"}).ok());
  EXPECT_EQ(read(), "{\"a\": 1}\n{\"b\": 2}\n");
  ASSERT_TRUE((*file)->Append({"{\"c\": 3}"}).ok());
  EXPECT_EQ(read(), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n");
  EXPECT_EQ(ResultsFile::Create("/nonexistent/out.jsonl").status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace llama
