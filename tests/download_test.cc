// The launcher's download against a local HTTP server that serves fixture
// checkpoints under a fake presigned path and injects faults.

#include "launcher/download.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/process.h"
#include "checkpoint/checklist.h"
#include "checkpoint/checkpoint_fixture.h"
#include "tests/fixtures/http_test_server.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::ReadFileOrEmpty;
namespace fs = std::filesystem;
using ::llama::testing::Fault;
using ::llama::testing::HttpTestServer;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr char kQuery[] = "Policy=eyJTdGF0ZW1lbnQiOlt7fQ__&Signature=s3cr3tS1gnatur3&Key-Pair-Id=K2ABC";

// What Meta's server holds: LICENSE, USE_POLICY.md, the tokenizer and its
// checklist, llama-2-7b (1 shard) and llama-2-13b (2 shards) from fixtures.
std::string ServedFolder() {
  const std::string root = std::string(getenv("TEST_TMPDIR")) + "/served";
  if (fs::exists(root + "/LICENSE")) return root;
  fs::create_directories(root + "/llama-2-7b");
  fs::create_directories(root + "/llama-2-13b");
  std::ofstream(root + "/LICENSE") << "LLAMA 2 COMMUNITY LICENSE AGREEMENT\n";
  std::ofstream(root + "/USE_POLICY.md") << "# Llama 2 Acceptable Use Policy\n";
  fs::copy_file(testing::TokenizerFixturePath("tokenizer.model"), root + "/tokenizer.model");
  std::ofstream(root + "/tokenizer_checklist.chk") << *Md5File(root + "/tokenizer.model") << "  tokenizer.model\n";
  for (const auto& [folder, fixture, shards] : {std::tuple<std::string, std::string, int>{"llama-2-7b", "tiny_fp32_mp1", 1},
                                                {"llama-2-13b", "tiny_fp32_mp2", 2}}) {
    std::ofstream checklist(root + "/" + folder + "/checklist.chk");
    std::vector<std::string> files = {"params.json"};
    for (int s = 0; s < shards; ++s) files.push_back(absl::StrCat("consolidated.0", s, ".pth"));
    for (const std::string& f : files) {
      fs::copy_file(testing::CheckpointFixturePath(fixture + "/" + f), root + "/" + folder + "/" + f);
      checklist << *Md5File(root + "/" + folder + "/" + f) << "  " << f << "\n";
    }
  }
  // Llama 3 (meta-llama/llama3's download.sh): 8b_instruction_tuned/ on the
  // server, with its own tokenizer.model and checklist.
  std::ofstream(root + "/USE_POLICY") << "Meta Llama 3 Acceptable Use Policy\n";
  fs::create_directories(root + "/8b_instruction_tuned");
  fs::copy_file("tests/fixtures/tiktoken_fixture/tokenizer.model", root + "/8b_instruction_tuned/tokenizer.model");
  std::ofstream checklist(root + "/8b_instruction_tuned/checklist.chk");
  for (const std::string f : {"consolidated.00.pth", "params.json"}) {
    fs::copy_file(testing::CheckpointFixturePath("llama3_bf16_mp1/" + f), root + "/8b_instruction_tuned/" + f);
  }
  for (const std::string f : {"consolidated.00.pth", "params.json", "tokenizer.model"}) {
    checklist << *Md5File(root + "/8b_instruction_tuned/" + f) << "  " << f << "\n";
  }
  // Llama 3.1 and later (llama-stack's `llama model download`): only the
  // model's folder, named as on Hugging Face; the scaled-RoPE fixture stands
  // in for Llama-3.2-1B-Instruct.
  const std::string stack = root + "/Llama-3.2-1B-Instruct";
  fs::create_directories(stack);
  fs::copy_file("tests/fixtures/tiktoken_fixture/tokenizer.model", stack + "/tokenizer.model");
  for (const std::string f : {"consolidated.00.pth", "params.json"}) {
    fs::copy_file(testing::CheckpointFixturePath("llama3_bf16_mp1/" + f), stack + "/" + f);
  }
  std::ofstream stack_checklist(stack + "/checklist.chk");
  for (const std::string f : {"consolidated.00.pth", "params.json", "tokenizer.model"}) {
    stack_checklist << *Md5File(stack + "/" + f) << "  " << f << "\n";
  }
  return root;
}

// A server for a Llama 2 7B folder whose shard is an 8 TB sparse file
// (no disk used), larger than any disk; served from TEST_TMPDIR/`name`.
absl::StatusOr<std::unique_ptr<HttpTestServer>> ServeHugeShard(const std::string& name) {
  const std::string root = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  fs::create_directories(root + "/llama-2-7b");
  for (const char* f : {"LICENSE", "USE_POLICY.md", "tokenizer.model", "tokenizer_checklist.chk",
                        "llama-2-7b/params.json"}) {
    fs::copy_file(ServedFolder() + "/" + f, root + "/" + f, fs::copy_options::overwrite_existing);
  }
  std::ofstream(root + "/llama-2-7b/consolidated.00.pth").close();
  fs::resize_file(root + "/llama-2-7b/consolidated.00.pth", 8000000000000);
  std::ofstream(root + "/llama-2-7b/checklist.chk")
      << *Md5File(root + "/llama-2-7b/params.json") << "  params.json\n"
      << "0123456789abcdef0123456789abcdef  consolidated.00.pth\n";
  return HttpTestServer::Start(root, "llama2", kQuery);
}

class DownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HttpTestServer>> server = HttpTestServer::Start(ServedFolder(), "llama2", kQuery);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    target_ = std::string(getenv("TEST_TMPDIR")) + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  DownloadOptions Options(std::vector<std::string> models = {"7B", "13B"}) {
    DownloadOptions o;
    o.url_template = server_->UrlTemplate();
    o.models = std::move(models);
    o.target_dir = target_;
    o.stall_timeout = 2s;
    return o;
  }
  void ExpectComplete(const std::string& relative) {
    EXPECT_EQ(*Md5File(target_ + "/" + relative), *Md5File(ServedFolder() + "/" + relative)) << relative;
    EXPECT_FALSE(fs::exists(target_ + "/" + relative + ".partial")) << relative;
  }
  std::unique_ptr<HttpTestServer> server_;
  std::string target_;
};

TEST_F(DownloadTest, CompleteDownloadInDownloadShLayout) {
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options());
  ASSERT_TRUE(report.ok()) << report.status();
  for (const char* f : {"LICENSE", "USE_POLICY.md", "tokenizer.model", "tokenizer_checklist.chk", "llama-2-7b/params.json",
                        "llama-2-7b/consolidated.00.pth", "llama-2-7b/checklist.chk", "llama-2-13b/consolidated.00.pth",
                        "llama-2-13b/consolidated.01.pth"}) {
    ExpectComplete(f);
  }
  EXPECT_EQ(report->fetched.size(), 6u);  // tokenizer + 7B (params, 1 shard) + 13B (params, 2 shards).
  // Again: everything matches its checklist and is not fetched.
  const int before = server_->Requests("llama-2-13b/consolidated.01.pth");
  report = DownloadMetaCheckpoints(Options());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->fetched.size(), 0u);
  EXPECT_EQ(report->skipped.size(), 6u);
  EXPECT_EQ(server_->Requests("llama-2-13b/consolidated.01.pth"), before);
}

TEST_F(DownloadTest, Llama3LayoutResumesAndChecksLikeLlama2) {
  const std::string remote = "8b_instruction_tuned/consolidated.00.pth";
  const int64_t size = fs::file_size(ServedFolder() + "/" + remote);
  Fault drop;
  drop.drop_after_bytes_once = static_cast<int>(size / 3);
  server_->SetFault(remote, drop);
  Fault corrupt;
  corrupt.corrupt_offset_once = 100;
  server_->SetFault("8b_instruction_tuned/tokenizer.model", corrupt);
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options({"Llama-3-8B-Instruct"}));
  ASSERT_TRUE(report.ok()) << report.status();
  for (const char* f : {"consolidated.00.pth", "params.json", "tokenizer.model", "checklist.chk"}) {
    EXPECT_EQ(*Md5File(target_ + "/Meta-Llama-3-8B-Instruct/" + f),
              *Md5File(ServedFolder() + "/8b_instruction_tuned/" + f))
        << f;
  }
  for (const char* f : {"LICENSE", "USE_POLICY"}) ExpectComplete(f);
  EXPECT_FALSE(fs::exists(target_ + "/tokenizer.model")) << "Llama 3's tokenizer lives in the model's folder";
  EXPECT_FALSE(fs::exists(target_ + "/USE_POLICY.md"));
  EXPECT_EQ(report->fetched.size(), 3u);
  EXPECT_LE(server_->BytesServed(remote), size + 1);  // Resumed, not refetched.
  EXPECT_GE(server_->Requests("8b_instruction_tuned/tokenizer.model"), 3);  // Probe, corrupt, again.
  // The downloaded folder converts as it is (tokenizer found inside).
  report = DownloadMetaCheckpoints(Options({"Llama-3-8B-Instruct"}));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->skipped.size(), 3u);
}

// Llama 3.1 and later, as llama-stack fetches them: the model's folder only
// (no LICENSE or USE_POLICY), by model id or Hugging Face name, resumed and
// checked like the others; the folder then runs as a checkpoint.
TEST_F(DownloadTest, LlamaStackLayoutForLlama31AndLater) {
  const std::string remote = "Llama-3.2-1B-Instruct/consolidated.00.pth";
  const int64_t size = fs::file_size(ServedFolder() + "/" + remote);
  Fault drop;
  drop.drop_after_bytes_once = static_cast<int>(size / 2);
  server_->SetFault(remote, drop);
  Fault corrupt;
  corrupt.corrupt_offset_once = 10;
  server_->SetFault("Llama-3.2-1B-Instruct/params.json", corrupt);
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options({"Llama3.2-1B-Instruct"}));
  ASSERT_TRUE(report.ok()) << report.status();
  for (const char* f : {"consolidated.00.pth", "params.json", "tokenizer.model", "checklist.chk"}) {
    ExpectComplete(absl::StrCat("Llama-3.2-1B-Instruct/", f));
  }
  EXPECT_EQ(report->fetched.size(), 3u);
  EXPECT_FALSE(fs::exists(target_ + "/LICENSE")) << "llama-stack fetches the model's folder only";
  EXPECT_EQ(server_->Requests("LICENSE"), 0);
  EXPECT_LE(server_->BytesServed(remote), size + 1);  // Resumed, not refetched.
  EXPECT_GE(server_->Requests("Llama-3.2-1B-Instruct/params.json"), 3);  // Probe, corrupt, again.
  report = DownloadMetaCheckpoints(Options({"meta-llama/Llama-3.2-1B-Instruct"}));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->skipped.size(), 3u);
}

// A job given --models and the URL but no --ckpt_dir downloads first and runs
// on the downloaded folder (its tokenizer found inside it), here at 2 ranks:
// the same completion as the job on the served checkpoint.
TEST_F(DownloadTest, JobDownloadsLlama32ThenRunsIt) {
  const auto run = [&](const std::string& name, std::vector<std::string> args) {
    const std::string dir = target_ + "/" + name;
    fs::create_directories(dir);
    ProcessOptions p;
    p.argv = {"launcher/launcher", "--nproc_per_node=2", "--prompt=I believe the meaning of life is",
              "--max_gen_len=8", "--temperature=0"};
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.env = {"PRESIGNED_URL=" + server_->UrlTemplate(), "HOME=" + dir};
    p.stdout_path = dir + "/stdout";
    p.stderr_path = dir + "/stderr";
    absl::StatusOr<std::unique_ptr<Process>> process = Process::Spawn(p);
    EXPECT_TRUE(process.ok());
    absl::StatusOr<ExitStatus> exit = (*process)->Wait(120s);
    EXPECT_TRUE(exit.ok() && exit->success()) << ReadFileOrEmpty(dir + "/stderr");
    return ReadFileOrEmpty(dir + "/stdout");
  };
  const std::string downloaded =
      run("downloaded", {"--models=Llama3.2-1B-Instruct", "--target_dir=" + target_ + "/weights"});
  const std::string served = run("served", {"--ckpt_dir=" + ServedFolder() + "/Llama-3.2-1B-Instruct"});
  EXPECT_THAT(served, HasSubstr("I believe the meaning of life is\n> "));
  EXPECT_THAT(downloaded, HasSubstr("downloaded 3 file(s)"));
  EXPECT_TRUE(absl::EndsWith(downloaded, served)) << downloaded << "\nvs\n" << served;
  EXPECT_TRUE(fs::exists(target_ + "/weights/Llama-3.2-1B-Instruct/consolidated.00.pth"));
}

TEST(MetaModelsTest, LlamaStackIdsAndWhatIsRefused) {
  absl::StatusOr<MetaModel> model = LookUpMetaModel("Llama3.1-405B-Instruct:bf16-mp16");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->folder, "Llama-3.1-405B-Instruct-MP16");
  EXPECT_EQ(model->shards, 16);
  EXPECT_EQ(LookUpMetaModel("Llama-3.2-1B")->folder, "Llama-3.2-1B");
  EXPECT_EQ(LookUpMetaModel("llama3.3-70b-instruct")->shards, 8);
  EXPECT_EQ(LookUpMetaModel("Llama3.2-3B-Instruct")->channel, MetaChannel::kLlamaStack);
  EXPECT_THAT(LookUpMetaModel("Llama3.1-405B").status().message(), HasSubstr("FP8"));
  EXPECT_THAT(LookUpMetaModel("Llama3.2-11B-Vision-Instruct").status().message(), HasSubstr("vision model"));
  EXPECT_THAT(LookUpMetaModel("Llama3.2-1B-Instruct:int4-qlora-eo8").status().message(), HasSubstr("INT4"));
  EXPECT_THAT(LookUpMetaModel("Llama-4-Scout-17B-16E").status().message(), HasSubstr("Llama 4"));
  EXPECT_THAT(LookUpMetaModel("Llama3.1-9B").status().message(), HasSubstr("Llama3.1-8B-Instruct"));
}

TEST_F(DownloadTest, OneFamilyPerUrl) {
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options({"7B", "Llama-3-8B"}));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("download them separately"));
  report = DownloadMetaCheckpoints(Options({"Llama-3-8B", "Llama3.1-8B"}));
  EXPECT_THAT(report.status().message(), HasSubstr("download them separately"));
  report = DownloadMetaCheckpoints(Options({"Llama-3-13B"}));
  EXPECT_THAT(report.status().message(), HasSubstr("unknown model \"Llama-3-13B\""));
}

TEST_F(DownloadTest, ResumesAfterADroppedConnection) {
  const std::string file = "llama-2-13b/consolidated.01.pth";
  const int64_t size = fs::file_size(ServedFolder() + "/" + file);
  Fault drop;
  drop.drop_after_bytes_once = static_cast<int>(size / 3);
  server_->SetFault(file, drop);
  ASSERT_TRUE(DownloadMetaCheckpoints(Options()).ok());
  ExpectComplete(file);
  // The size probe costs one byte; nothing else is fetched twice.
  EXPECT_LE(server_->BytesServed(file), size + 1);
  EXPECT_GE(server_->Requests(file), 3);  // Probe, dropped transfer, resumed transfer.
}

TEST_F(DownloadTest, ExpiredUrlStopsAtOnceWithTheReason) {
  DownloadOptions o = Options();
  o.url_template = absl::StrCat("http://127.0.0.1:", server_->port(), "/llama2/*?Policy=old&Signature=expired99");
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(o);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(report.status().message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(report.status().message(), HasSubstr("expired"));
  EXPECT_THAT(report.status().message(), HasSubstr("?<redacted>"));
  EXPECT_THAT(report.status().message(), Not(HasSubstr("expired99")));
  EXPECT_EQ(server_->Requests("LICENSE"), 1);  // At once: no retry (a count, not a clock, on a loaded machine).
}

// A model whose files the server does not have (HTTP 404): the error, and
// no empty model folder left in the target (a user would take it for a
// download).
TEST_F(DownloadTest, ARefusedModelLeavesNoEmptyFolder) {
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options({"70B"}));
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("HTTP 404"));
  EXPECT_FALSE(fs::exists(target_ + "/llama-2-70b"));
  for (const auto& entry : fs::recursive_directory_iterator(target_)) {
    EXPECT_TRUE(entry.is_regular_file() && entry.file_size() > 0) << entry.path() << " is left behind";
  }
}

TEST_F(DownloadTest, CorruptedByteIsDetectedAndRefetched) {
  const std::string file = "llama-2-7b/consolidated.00.pth";
  Fault corrupt;
  corrupt.corrupt_offset_once = 1000;
  server_->SetFault(file, corrupt);
  ASSERT_TRUE(DownloadMetaCheckpoints(Options({"7B"})).ok());
  ExpectComplete(file);
  EXPECT_GE(server_->Requests(file), 3);
}

TEST_F(DownloadTest, ServerErrorsAreRetried) {
  Fault flaky;
  flaky.statuses_first = {500, 503};
  server_->SetFault("tokenizer.model", flaky);
  const int before = server_->Requests("tokenizer.model");
  ASSERT_TRUE(DownloadMetaCheckpoints(Options({"7B"})).ok());
  ExpectComplete("tokenizer.model");
  // The two errors were answered and retried: at least three requests.
  EXPECT_GE(server_->Requests("tokenizer.model") - before, 3);
}

TEST_F(DownloadTest, StallHitsTheTimeout) {
  Fault stall;
  stall.stall_ms = 6000;
  server_->SetFault("llama-2-7b/consolidated.00.pth", stall);
  DownloadOptions o = Options({"7B"});
  o.stall_timeout = 1s;
  o.max_attempts = 2;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(o);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("gave up on llama-2-7b/consolidated.00.pth after 2 attempts"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST_F(DownloadTest, WebPageInsteadOfTheFile) {
  Fault html;
  html.html_instead = true;
  server_->SetFault("tokenizer.model", html);
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(Options({"7B"}));
  EXPECT_THAT(report.status().message(), HasSubstr("web page instead of tokenizer.model"));
  EXPECT_FALSE(fs::exists(target_ + "/tokenizer.model"));
  EXPECT_FALSE(fs::exists(target_ + "/tokenizer.model.partial"));
}

TEST_F(DownloadTest, ServerIgnoringRangeRestartsTheFile) {
  const std::string file = "llama-2-7b/consolidated.00.pth";
  fs::create_directories(target_ + "/llama-2-7b");
  std::ofstream(target_ + "/" + file + ".partial") << std::string(100, 'x');  // Not even the right bytes.
  Fault no_range;
  no_range.ignore_range = true;
  server_->SetFault(file, no_range);
  ASSERT_TRUE(DownloadMetaCheckpoints(Options({"7B"})).ok());
  ExpectComplete(file);
}

// A server that ignores Range still gives the size (its Content-Length,
// the body cut off at once): the free-space check and the progress know it
// (#33: "749.94 kB / 0 B", and no check at all).
TEST_F(DownloadTest, ServerIgnoringRangeStillGivesTheSize) {
  absl::StatusOr<std::unique_ptr<HttpTestServer>> huge = ServeHugeShard("served_huge_no_range");
  ASSERT_TRUE(huge.ok()) << huge.status();
  Fault no_range;
  no_range.ignore_range = true;
  (*huge)->SetFault("llama-2-7b/consolidated.00.pth", no_range);
  DownloadOptions o = Options({"7B"});
  o.url_template = (*huge)->UrlTemplate();
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(o);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("the download needs 8.00 TB more in " + target_));
  EXPECT_LT((*huge)->BytesServed("llama-2-7b/consolidated.00.pth"), uint64_t{256} << 20);
}

TEST_F(DownloadTest, BadInput) {
  DownloadOptions o = Options({"7B", "65B"});
  EXPECT_THAT(DownloadMetaCheckpoints(o).status().message(), HasSubstr("unknown model \"65B\""));
  o = Options();
  o.url_template = "https://example.com/no-star?Signature=abc";
  EXPECT_THAT(DownloadMetaCheckpoints(o).status().message(), HasSubstr("?<redacted>"));
  EXPECT_THAT(DownloadMetaCheckpoints(o).status().message(), Not(HasSubstr("abc")));
  EXPECT_EQ(LookUpMetaModel("70B-chat")->folder, "llama-2-70b-chat");
  EXPECT_EQ(LookUpMetaModel("70B-chat")->shards, 8);
  EXPECT_EQ(RedactUrl("https://h/p/*?a=1&b=2"), "https://h/p/*?<redacted>");
}

// A URL with "*" but no "?" is refused, and its secret (all after the "*")
// appears in no message; the redactor hides it in file URLs whatever the
// URL's shape.
TEST_F(DownloadTest, TheSecretNeverAppearsWhateverTheUrlsShape) {
  DownloadOptions o = Options();
  o.url_template = "https://host/*Policy=SECRETpolicy&Signature=SECRETsig";
  const absl::Status refused = DownloadMetaCheckpoints(o).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("no query string"));
  EXPECT_THAT(refused.message(), HasSubstr("https://host/*<redacted>"));
  EXPECT_THAT(refused.message(), Not(HasSubstr("SECRET")));
  EXPECT_FALSE(fs::exists(o.target_dir + "/LICENSE"));  // Refused before any request.

  const struct {
    const char* url_template;
    const char* shown;
  } shapes[] = {
      {"https://host/*Policy=SECRET1", "https://host/*<redacted>"},
      {"https://host/*?Policy=SECRET1&Signature=SECRET2", "https://host/*<redacted>"},
      {"https://host/p?Policy=SECRET1&key=*&Signature=SECRET2", "https://host/p?<redacted>"},
      {"https://host/*/suffix?Signature=SECRET1", "https://host/*<redacted>"},
  };
  for (const auto& shape : shapes) {
    const UrlRedactor redact(shape.url_template);
    EXPECT_EQ(redact.Template(), shape.shown) << shape.url_template;
    const std::string file_url = FileUrl(shape.url_template, "llama-2-7b/params.json");
    const std::string message = redact(absl::StrCat("fetching ", file_url, " failed; ", shape.url_template));
    EXPECT_THAT(message, Not(HasSubstr("SECRET"))) << message;
    EXPECT_THAT(message, HasSubstr("<redacted>")) << message;
  }
}

// A shard larger than any disk (an 8 TB sparse file on the server) is
// refused before a byte of it is fetched, with sizes in the message.
TEST_F(DownloadTest, NotEnoughFreeSpaceIsRefusedUpFront) {
  absl::StatusOr<std::unique_ptr<HttpTestServer>> huge = ServeHugeShard("served_huge");
  ASSERT_TRUE(huge.ok()) << huge.status();
  DownloadOptions o = Options({"7B"});
  o.url_template = (*huge)->UrlTemplate();
  absl::StatusOr<DownloadReport> report = DownloadMetaCheckpoints(o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(report.status().message(), HasSubstr("the download needs 8.00 TB more in " + target_));
  EXPECT_THAT(report.status().message(), HasSubstr("is free"));
  EXPECT_LE((*huge)->BytesServed("llama-2-7b/consolidated.00.pth"), 1);  // The size probe's one byte.
  EXPECT_FALSE(fs::exists(target_ + "/llama-2-7b/consolidated.00.pth.partial"));
}

// Through the launcher binary: the URL's query appears nowhere in what it
// prints or writes, on success or failure.
TEST_F(DownloadTest, TheUrlNeverLeaks) {
  for (const bool good : {true, false}) {
    const std::string dir = target_ + (good ? "_good" : "_bad");
    fs::create_directories(dir);
    const std::string url = good ? server_->UrlTemplate()
                                 : absl::StrCat("http://127.0.0.1:", server_->port(), "/nope/*?", kQuery);
    ProcessOptions p;
    p.argv = {"launcher/launcher", "download", "--models=7B", "--target_dir=" + dir + "/target"};
    p.env = {"PRESIGNED_URL=" + url, "HOME=" + dir};
    p.stdout_path = dir + "/stdout";
    p.stderr_path = dir + "/stderr";
    absl::StatusOr<std::unique_ptr<Process>> process = Process::Spawn(p);
    ASSERT_TRUE(process.ok());
    absl::StatusOr<ExitStatus> exit = (*process)->Wait(60s);
    ASSERT_TRUE(exit.ok());
    EXPECT_EQ(exit->success(), good) << ReadFileOrEmpty(dir + "/stderr");
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().extension() == ".pth" || entry.path().filename() == "tokenizer.model") continue;
      EXPECT_THAT(ReadFileOrEmpty(entry.path()), Not(HasSubstr("s3cr3tS1gnatur3"))) << entry.path();
    }
  }
}

}  // namespace
}  // namespace llama
