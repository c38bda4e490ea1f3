#include "worker/results.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

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

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A reader sees the old whole file or the new whole file, never a mix or a
// prefix, while the file is rewritten; a failed write leaves the old one.
TEST(ResultsTest, WritesAtomically) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/out.jsonl";
  const std::vector<std::string> a(2000, std::string(100, 'a')), b(3000, std::string(100, 'b'));
  ASSERT_TRUE(WriteLinesAtomically(path, a).ok());
  std::string whole_a, whole_b;
  for (const std::string& line : a) whole_a += line + "\n";
  for (const std::string& line : b) whole_b += line + "\n";
  std::atomic<bool> done{false};
  int torn = 0, reads = 0;
  std::thread reader([&] {
    while (!done) {
      const std::string seen = ReadAll(path);
      ++reads;
      if (seen != whole_a && seen != whole_b) ++torn;
    }
  });
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(WriteLinesAtomically(path, i % 2 == 0 ? b : a).ok());
  done = true;
  reader.join();
  EXPECT_EQ(torn, 0) << "of " << reads << " reads";
  EXPECT_GT(reads, 0);
  // The temporary file cannot be made (a folder holds its name): an error,
  // and the previous contents stay whole.
  std::filesystem::create_directory(path + ".tmp");
  EXPECT_FALSE(WriteLinesAtomically(path, {"x"}).ok());
  EXPECT_EQ(ReadAll(path), whole_a);
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
