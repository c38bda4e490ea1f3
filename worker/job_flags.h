// The job's flags, defined once for every binary that takes them: the
// launcher (which checks them and passes them on to each worker), the
// worker and the bench. Names and defaults follow the reference's
// example_text_completion.py / example_chat_completion.py and torchrun.
//
// Only binaries depend on this library (flags belong to main()); libraries
// take the values as JobFlags or TransformerOptions.

#ifndef LLAMA_WORKER_JOB_FLAGS_H_
#define LLAMA_WORKER_JOB_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "absl/status/status.h"

// The model's files.
DECLARE_string(tokenizer_path);
DECLARE_string(shard_dir);
// What to run.
DECLARE_string(prompt);
DECLARE_string(prompts_file);
DECLARE_string(dialogs_file);
DECLARE_string(output);
// Generation.
DECLARE_double(temperature);
DECLARE_double(top_p);
DECLARE_int32(max_seq_len);
DECLARE_int32(max_batch_size);
DECLARE_int32(max_gen_len);
DECLARE_uint64(seed);
DECLARE_bool(logprobs);
DECLARE_bool(echo);
// The engine.
DECLARE_int32(max_num_batched_tokens);
DECLARE_double(kv_cache_gb);
DECLARE_double(kv_cache_free_share);
DECLARE_int32(kv_block_size);
DECLARE_bool(enable_prefix_caching);
// Serving (launcher serve; the worker's --serve).
DECLARE_bool(serve);
DECLARE_string(host);
DECLARE_int32(port);
DECLARE_string(served_model_name);
DECLARE_string(api_key);
DECLARE_string(api_key_file);
DECLARE_int32(max_queue);
DECLARE_int32(max_connections);
DECLARE_int32(max_header_bytes);
DECLARE_int32(max_headers);
DECLARE_int64(max_body_bytes);
DECLARE_int32(request_timeout);
DECLARE_int32(keep_alive_timeout);
DECLARE_int32(drain_timeout);
// The model on each rank.
DECLARE_string(device);
DECLARE_string(kv_cache_dtype);
DECLARE_bool(cuda_graphs);
DECLARE_bool(int8_prefill);
DECLARE_bool(bf16_activations);
DECLARE_int32(threads);
// Deadlines between ranks.
DECLARE_int32(rendezvous_timeout);
DECLARE_int32(load_timeout);
DECLARE_int32(collective_timeout);

namespace llama {

struct JobFlags {
  std::string prompt, prompts_file, dialogs_file, output;
  double temperature = 0.6;
  double top_p = 0.9;
  int max_seq_len = 512;
  int max_batch_size = 4;
  int max_gen_len = -1;
  uint64_t seed = 1;
  bool logprobs = false;
  bool echo = false;
  int max_num_batched_tokens = 512;
  double kv_cache_gb = 0;
  double kv_cache_free_share = 0;
  int kv_block_size = 16;
  bool enable_prefix_caching = true;
  bool serve = false;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key, api_key_file;
  int max_queue = 1024;
  int max_connections = 4096;
  int max_header_bytes = 65536;
  int max_headers = 100;
  int64_t max_body_bytes = 8 << 20;
  int request_timeout = 30, keep_alive_timeout = 60;
  int drain_timeout = 30;
  std::string device, kv_cache_dtype = "f32";
  bool cuda_graphs = true;
  bool int8_prefill = false;
  bool bf16_activations = false;
  int threads = 0;
  int rendezvous_timeout = 300, load_timeout = 1800, collective_timeout = 300;
};

// The flags as given on this binary's command line.
JobFlags JobFlagsFromCommandLine();

// Ranges and combinations, each error naming the flag: at most one of
// --prompt / --prompts_file / --dialogs_file (exactly one when
// `need_input`), sampling
// ranges, lengths, sizes, the KV cache type, positive deadlines.
absl::Status CheckJobFlags(const JobFlags& flags, bool need_input);

// The worker arguments that carry `flags` ("--name=value"): every flag of
// this set but --device, --tokenizer_path and --shard_dir, which the
// launcher resolves per node, and --api_key, a secret that goes to rank 0
// in its environment (kApiKeyVariable), not on a command line others can
// read; paths made absolute (a worker does not share the launcher's
// working directory).
std::vector<std::string> WorkerArguments(const JobFlags& flags);

// Where a worker finds the API key when --api_key is not given.
inline constexpr char kApiKeyVariable[] = "LLAMA_API_KEY";

}  // namespace llama

#endif  // LLAMA_WORKER_JOB_FLAGS_H_
