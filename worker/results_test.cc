#include "worker/results.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace llama {
namespace {

using ::testing::HasSubstr;

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

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

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

// A fresh file is written beside the old one, which stays whole until the
// first batch replaces it (a job killed before its first answer leaves it
// as it was); then each batch's lines are on disk as soon as Append
// returns, whatever happens to the job after. A job that ends before its
// first answer leaves nothing of its own behind.
TEST(ResultsTest, ResultsFileKeepsTheOldFileUntilTheFirstBatch) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/results.jsonl";
  WriteText(path, "{\"stale\": true}\n");
  {
    absl::StatusOr<std::unique_ptr<ResultsFile>> unused = ResultsFile::Create(path);
    ASSERT_TRUE(unused.ok()) << unused.status();
    EXPECT_EQ(ReadAll(path), "{\"stale\": true}\n");
  }
  EXPECT_EQ(ReadAll(path), "{\"stale\": true}\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  absl::StatusOr<std::unique_ptr<ResultsFile>> file = ResultsFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ReadAll(path), "{\"stale\": true}\n");
  ASSERT_TRUE((*file)->Append({"{\"a\": 1}", "{\"b\": 2}"}).ok());
  EXPECT_EQ(ReadAll(path), "{\"a\": 1}\n{\"b\": 2}\n");
  ASSERT_TRUE((*file)->Append({"{\"c\": 3}"}).ok());
  EXPECT_EQ(ReadAll(path), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n");
  file->reset();
  EXPECT_EQ(ReadAll(path), "{\"a\": 1}\n{\"b\": 2}\n{\"c\": 3}\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  EXPECT_EQ(ResultsFile::Create("/nonexistent/out.jsonl").status().code(), absl::StatusCode::kPermissionDenied);
}

// A stand-in for the worker's identity of a job: fields that differ in
// their prompts.
JobIdentity Identity(const std::string& prompts) {
  nlohmann::json fields;
  fields["model"] = "0123456789abcdef";
  fields["inputs"] = prompts;
  return *JobIdentity::FromJson(fields);
}

TEST(ResultsTest, EveryLineCarriesItsIndexAndJob) {
  EXPECT_EQ(ResultLine(7, Identity("p1"), Sample(), false, false),
            R"({"index":7,"generation":" Paris \"quoted\"","token_ids":[3,4],"job":{"inputs":"p1","model":"0123456789abcdef"}})");
  Completion failed;
  failed.status = absl::InvalidArgumentError("prompt 3 has 900 tokens");
  EXPECT_EQ(ResultLine(3, Identity("p1"), failed, true, true),
            R"({"index":3,"error":"prompt 3 has 900 tokens","job":{"inputs":"p1","model":"0123456789abcdef"}})");
}

// A rerun keeps the answered lines of the same job; an error line and a line
// cut short run again; another job's file is refused naming what differs,
// never overwritten.
TEST(ResultsTest, ResumesOnlyTheSameJob) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/resume.jsonl";
  const JobIdentity k1 = Identity("p1");
  absl::StatusOr<PreviousResults> none = ResumeResults(path + ".absent", k1, 4);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->done.empty());
  Completion failed;
  failed.status = absl::InvalidArgumentError("too long");
  const std::string a = ResultLine(0, k1, Sample(), false, false), b = ResultLine(2, k1, Sample(), false, false);
  WriteText(path, a + "\n" + ResultLine(1, k1, failed, false, false) + "\n" + b + "\n{\"index\":3,\"gen");
  absl::StatusOr<PreviousResults> previous = ResumeResults(path, k1, 4);
  ASSERT_TRUE(previous.ok()) << previous.status();
  EXPECT_EQ(previous->done, (std::set<size_t>{0, 2}));
  EXPECT_EQ(previous->lines, (std::vector<std::string>{a, b}));
  // The file starts again from the kept lines, and the next batch follows.
  {
    absl::StatusOr<std::unique_ptr<ResultsFile>> file = ResultsFile::Create(path, previous->lines);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append({"next"}).ok());
  }
  EXPECT_EQ(ReadAll(path), a + "\n" + b + "\nnext\n");

  // A blank line (an editor's) is no line of another job.
  WriteText(path, a + "\n\n" + b + "\n  \n");
  absl::StatusOr<PreviousResults> blank = ResumeResults(path, k1, 4);
  ASSERT_TRUE(blank.ok()) << blank.status();
  EXPECT_EQ(blank->done, (std::set<size_t>{0, 2}));

  WriteText(path, a + "\n");
  absl::StatusOr<PreviousResults> other = ResumeResults(path, Identity("p2"), 4);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("--output=" + path +
                        " holds answers of another job: prompts or dialogs differ (this job: \"p2\"; the file's: "
                        "\"p1\") (line 1)"));
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("--overwrite_output starts it afresh"));
  WriteText(path, "{\"generation\":\"x\",\"token_ids\":[1]}\n");
  EXPECT_THAT(std::string(ResumeResults(path, k1, 4).status().message()),
              HasSubstr("is not a batch job's output: line 1 names no job"));
  WriteText(path, "{\"index\":0,\"job\":\"0123456789abcdef\"}\n");
  EXPECT_THAT(std::string(ResumeResults(path, k1, 4).status().message()),
              HasSubstr("line 1 names its job by a bare key, as older workers wrote it"));
  WriteText(path, a + "\n");
  EXPECT_THAT(std::string(ResumeResults(path, k1, 0).status().message()), HasSubstr("line 1 has no index of this job"));
  EXPECT_EQ(ReadAll(path), a + "\n");
}

}  // namespace
}  // namespace llama
