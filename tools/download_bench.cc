// //tools:download_bench: the launcher's download next to curl, on one
// large file served from this machine (loopback, so the numbers compare
// the clients, not a network).
//
//   bazel run //tools:download_bench -- --size_mb=2048

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <unistd.h>

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "checkpoint/checklist.h"
#include "launcher/download.h"
#include "tests/fixtures/http_test_server.h"
#include "tools/tool_main.h"

DEFINE_int32(size_mb, 2048, "Size of the served file.");
DEFINE_int32(link_mb_per_s, 0,
             "Pace the server like a link of this many MB/s (0: as fast as loopback goes). Below MD5's speed, "
             "this shows whether hashing overlaps the transfer.");
DEFINE_string(scratch_dir, "/tmp/llama2-download-bench", "Where to put the served file and the downloads.");

namespace fs = std::filesystem;

namespace {

absl::Status Bench() {
  const std::string served = FLAGS_scratch_dir + "/served";
  fs::remove_all(FLAGS_scratch_dir);
  fs::create_directories(served + "/llama-2-7b");
  {
    std::ofstream big(served + "/llama-2-7b/consolidated.00.pth", std::ios::binary);
    std::vector<uint64_t> block(1 << 17);
    std::mt19937_64 rng(1);
    for (int mb = 0; mb < FLAGS_size_mb; ++mb) {
      for (uint64_t& v : block) v = rng();
      big.write(reinterpret_cast<const char*>(block.data()), block.size() * sizeof(uint64_t));
    }
  }
  std::ofstream(served + "/llama-2-7b/params.json") << "{}";
  std::ofstream(served + "/LICENSE") << "license";
  std::ofstream(served + "/USE_POLICY.md") << "policy";
  std::ofstream(served + "/tokenizer.model") << "tokenizer";
  std::ofstream(served + "/tokenizer_checklist.chk") << *llama::Md5File(served + "/tokenizer.model") << "  tokenizer.model\n";
  std::ofstream(served + "/llama-2-7b/checklist.chk")
      << *llama::Md5File(served + "/llama-2-7b/consolidated.00.pth") << "  consolidated.00.pth\n"
      << *llama::Md5File(served + "/llama-2-7b/params.json") << "  params.json\n";

  ASSIGN_OR_RETURN(std::unique_ptr<llama::testing::HttpTestServer> server,
                   llama::testing::HttpTestServer::Start(served, "bench", "Signature=x"));
  if (FLAGS_link_mb_per_s > 0) {
    llama::testing::Fault paced;
    paced.bytes_per_second = int64_t{FLAGS_link_mb_per_s} * 1000000;
    server->SetFault("llama-2-7b/consolidated.00.pth", paced);
  }
  const double bytes = static_cast<double>(int64_t{FLAGS_size_mb} << 20);

  const std::string curl_target = FLAGS_scratch_dir + "/curl.pth";
  const std::string command = absl::StrCat("curl -sS -o ", curl_target, " '",
                                           llama::FileUrl(server->UrlTemplate(), "llama-2-7b/consolidated.00.pth"), "'");
  // Both clients start with no dirty pages to write back: otherwise the second
  // one is throttled for the first one's (and the served file's) writes.
  sync();
  auto start = std::chrono::steady_clock::now();
  if (std::system(command.c_str()) != 0) return absl::UnavailableError("curl failed");
  const double curl_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  llama::DownloadOptions options;
  options.url_template = server->UrlTemplate();
  options.models = {"7B"};
  options.target_dir = FLAGS_scratch_dir + "/ours";
  sync();
  start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(llama::DownloadMetaCheckpoints(options).status());
  const double our_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("file:      %d MB over HTTP on 127.0.0.1\n", FLAGS_size_mb);
  std::printf("curl:      %.2f s, %.0f MB/s (download only)\n", curl_seconds, bytes / curl_seconds / 1e6);
  std::printf("launcher:  %.2f s, %.0f MB/s (download + MD5 while downloading + size probe + fsync)\n", our_seconds,
              bytes / our_seconds / 1e6);
  fs::remove_all(FLAGS_scratch_dir);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return llama::ToolMain(argc, argv, "download_bench", "Compares //launcher download with curl on a large local file.",
                         [](const std::vector<std::string>&) { return Bench(); });
}
