#include "worker/job_flags.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

namespace llama {
namespace {

// Whatever the launcher passes on, the worker reads back as it was given:
// WorkerArguments and the flag definitions cannot drift apart.
TEST(JobFlagsTest, WorkerArgumentsRoundTripThroughTheFlags) {
  JobFlags given;
  given.prompts_file = "prompts.json";
  given.output = "/tmp/out.jsonl";
  given.temperature = 0.6;  // Not exactly representable: must survive as written.
  given.top_p = 0.95;
  given.max_seq_len = 1024;
  given.max_batch_size = 8;
  given.max_gen_len = 64;
  given.seed = 12345678901234ull;
  given.logprobs = true;
  given.echo = true;
  given.max_num_batched_tokens = 96;
  given.kv_cache_gb = 0.3;
  given.kv_block_size = 32;
  given.kv_cache_free_share = 0.25;
  given.enable_prefix_caching = false;
  given.serve = true;
  given.host = "0.0.0.0";
  given.port = 8123;
  given.served_model_name = "llama-2-7b";
  given.api_key = "s3cret";
  given.max_queue = 7;
  given.max_connections = 11;
  given.max_header_bytes = 4096;
  given.max_headers = 12;
  given.max_body_bytes = 5000;
  given.request_timeout = 13;
  given.keep_alive_timeout = 14;
  given.drain_timeout = 9;
  given.kv_cache_dtype = "bf16";
  given.cuda_graphs = false;
  given.int8_prefill = false;
  given.bf16_activations = true;
  given.threads = 3;
  given.rendezvous_timeout = 11;
  given.load_timeout = 12;
  given.collective_timeout = 13;
  const std::vector<std::string> args = WorkerArguments(given);
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    ASSERT_EQ(arg.rfind("--", 0), 0u) << arg;
    ASSERT_NE(eq, std::string::npos) << arg;
    ASSERT_FALSE(gflags::SetCommandLineOption(arg.substr(2, eq - 2).c_str(), arg.substr(eq + 1).c_str()).empty())
        << "the worker has no flag for " << arg;
  }
  const JobFlags got = JobFlagsFromCommandLine();
  EXPECT_EQ(got.prompts_file, std::filesystem::absolute("prompts.json").string());
  EXPECT_EQ(got.output, "/tmp/out.jsonl");
  EXPECT_EQ(got.temperature, 0.6);
  EXPECT_EQ(got.top_p, 0.95);
  EXPECT_EQ(got.max_seq_len, 1024);
  EXPECT_EQ(got.max_batch_size, 8);
  EXPECT_EQ(got.max_gen_len, 64);
  EXPECT_EQ(got.seed, 12345678901234ull);
  EXPECT_TRUE(got.logprobs);
  EXPECT_TRUE(got.echo);
  EXPECT_EQ(got.max_num_batched_tokens, 96);
  EXPECT_EQ(got.kv_cache_gb, 0.3);
  EXPECT_EQ(got.kv_block_size, 32);
  EXPECT_EQ(got.kv_cache_free_share, 0.25);
  EXPECT_FALSE(got.enable_prefix_caching);
  EXPECT_TRUE(got.serve);
  EXPECT_EQ(got.host, "0.0.0.0");
  EXPECT_EQ(got.port, 8123);
  EXPECT_EQ(got.served_model_name, "llama-2-7b");
  EXPECT_EQ(got.max_queue, 7);
  EXPECT_EQ(got.max_connections, 11);
  EXPECT_EQ(got.max_header_bytes, 4096);
  EXPECT_EQ(got.max_headers, 12);
  EXPECT_EQ(got.max_body_bytes, 5000);
  EXPECT_EQ(got.request_timeout, 13);
  EXPECT_EQ(got.keep_alive_timeout, 14);
  EXPECT_EQ(got.drain_timeout, 9);
  for (const std::string& arg : args) EXPECT_EQ(arg.find("s3cret"), std::string::npos) << "the key is on argv";
  EXPECT_EQ(got.kv_cache_dtype, "bf16");
  EXPECT_FALSE(got.cuda_graphs);
  EXPECT_FALSE(got.int8_prefill);
  EXPECT_TRUE(got.bf16_activations);
  EXPECT_EQ(got.threads, 3);
  EXPECT_EQ(got.rendezvous_timeout, 11);
  EXPECT_EQ(got.load_timeout, 12);
  EXPECT_EQ(got.collective_timeout, 13);
  EXPECT_EQ(std::count_if(args.begin(), args.end(), [](const std::string& a) { return a.rfind("--device", 0) == 0; }),
            0);
}

TEST(JobFlagsTest, BadValuesNameTheFlag) {
  JobFlags f;
  f.prompt = "hi";
  EXPECT_TRUE(CheckJobFlags(f, true).ok());
  const struct {
    void (*mutate)(JobFlags&);
    const char* message;
  } cases[] = {
      {[](JobFlags& j) { j.max_gen_len = -2; }, "--max_gen_len=-2: expected -1 (max_seq_len - 1) or a count >= 0"},
      {[](JobFlags& j) { j.top_p = 0; }, "--top_p=0: expected a value in (0, 1]"},
      {[](JobFlags& j) { j.temperature = -1; }, "--temperature=-1: expected a value in [0, 2]"},
      {[](JobFlags& j) { j.temperature = 2.5; }, "--temperature=2.5: expected a value in [0, 2]"},
      {[](JobFlags& j) { j.max_seq_len = 1; }, "--max_seq_len=1: expected 0 (the model's own) or at least 2"},
      {[](JobFlags& j) { j.max_batch_size = 0; }, "--max_batch_size=0: expected at least 1"},
      {[](JobFlags& j) { j.load_timeout = 0; }, "--load_timeout=0: expected >= 1 second"},
      {[](JobFlags& j) { j.max_num_batched_tokens = 0; }, "--max_num_batched_tokens=0: expected at least 1"},
      {[](JobFlags& j) { j.kv_cache_gb = -1; }, "--kv_cache_gb=-1: expected a size in GB >= 0 (0: the default)"},
      {[](JobFlags& j) { j.kv_block_size = 0; }, "--kv_block_size=0: expected 1 to 4096 positions"},
      {[](JobFlags& j) { j.num_speculative_tokens = 0; }, "--num_speculative_tokens=0: expected 1 to 16"},
      {[](JobFlags& j) { j.num_speculative_tokens = 17; }, "--num_speculative_tokens=17: expected 1 to 16"},
      {[](JobFlags& j) { j.kv_cache_free_share = 1.5; }, "--kv_cache_free_share=1.5: expected a share from 0 to 0.95"},
      {[](JobFlags& j) {
         j.kv_cache_free_share = 0.5;
         j.kv_cache_gb = 2;
       },
       "give --kv_cache_gb or --kv_cache_free_share, not both"},
      {[](JobFlags& j) { j.port = 70000; }, "--port=70000: expected 0 to 65535"},
      {[](JobFlags& j) { j.max_queue = -1; }, "--max_queue=-1: expected >= 0"},
      {[](JobFlags& j) { j.max_connections = 0; }, "--max_connections=0: expected >= 1"},
      {[](JobFlags& j) { j.max_body_bytes = 10; }, "--max_body_bytes=10: expected >= 1024"},
      {[](JobFlags& j) { j.request_timeout = 0; }, "--request_timeout=0: expected >= 1"},
      {[](JobFlags& j) { j.prompts_file = "x.json"; },
       "give exactly one of --prompt, --prompts_file, --dialogs_file (2 given)"},
  };
  for (const auto& c : cases) {
    JobFlags bad = f;
    c.mutate(bad);
    EXPECT_EQ(CheckJobFlags(bad, true).message(), c.message);
  }
  JobFlags cache = f;
  cache.kv_cache_dtype = "i8";
  EXPECT_NE(CheckJobFlags(cache, true).message().find("kv_cache_dtype"), absl::string_view::npos);
  JobFlags device = f;
  device.device = "tpu";
  EXPECT_NE(CheckJobFlags(device, true).message().find("--device=\"tpu\""), absl::string_view::npos);
  JobFlags none;
  EXPECT_TRUE(CheckJobFlags(none, false).ok());
  EXPECT_FALSE(CheckJobFlags(none, true).ok());
}

}  // namespace
}  // namespace llama
