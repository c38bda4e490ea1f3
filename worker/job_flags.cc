#include "worker/job_flags.h"

#include <filesystem>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/device.h"
#include "ops/dtype.h"

DEFINE_string(tokenizer_path, "",
              "tokenizer.model. Launcher default: next to --ckpt_dir (its parent folder, as download.sh lays it "
              "out) or in it (a Hugging Face folder); required by the worker.");
DEFINE_string(shard_dir, "",
              "Folder of rank-R-of-N.shard files (//tools:convert). Launcher default: <ckpt_dir>/shards/tp<world "
              "size>, or ~/.cache/llama2-cpp/shards/<checkpoint>-<hash>/tp<world size> when the checkpoint "
              "folder is read-only; required by the worker.");
DEFINE_string(prompt, "", "One prompt for text completion.");
DEFINE_string(prompts_file, "", "Prompts for text completion: a JSON array of strings, or JSON Lines.");
DEFINE_string(dialogs_file, "", "Dialogs for chat completion: a JSON array of [{role, content}, ...].");
DEFINE_string(output, "", "Write one JSON object per prompt or dialog to this file (JSON Lines, by rank 0).");
DEFINE_double(temperature, 0.6, "Sampling temperature; 0 is greedy.");
DEFINE_double(top_p, 0.9, "Top-p (nucleus) sampling threshold, in (0, 1].");
DEFINE_int32(max_seq_len, 512, "Longest sequence (prompt + generation) the KV cache holds.");
DEFINE_int32(max_batch_size, 4,
             "Most sequences in flight at once; a finished one's place goes to the next prompt (continuous "
             "batching).");
DEFINE_int32(max_gen_len, -1, "Most tokens to generate per prompt; -1: max_seq_len - 1, as the reference.");
DEFINE_uint64(seed, 1, "Sampling seed (rank 0's is the one that counts).");
DEFINE_bool(logprobs, false, "Report each generated token's log-probability.");
DEFINE_bool(echo, false, "Include the prompt tokens in the output.");
DEFINE_int32(max_num_batched_tokens, 512,
             "Most tokens per model step: decodes first, then pieces of prompts up to this budget (at least "
             "--max_batch_size is used).");
DEFINE_double(kv_cache_gb, 0,
              "KV cache per rank, in GB (1e9 bytes), as blocks of --kv_block_size positions shared by every "
              "sequence; 0: --max_batch_size x --max_seq_len positions.");
DEFINE_double(kv_cache_free_share, 0,
              "KV cache per rank as this share (0 to 0.95) of the memory free once the weights and work buffers "
              "are counted (RAM on the CPU, the GPU's memory on CUDA); every rank takes the smallest such cache "
              "of all. 0: --kv_cache_gb decides.");
DEFINE_int32(kv_block_size, 16, "Positions per KV cache block (paged attention).");
DEFINE_bool(enable_prefix_caching, true,
            "Reuse the KV blocks of a prompt prefix already computed (a shared system prompt is prefilled once).");
DEFINE_bool(serve, false,
            "Worker: serve the OpenAI API (rank 0 on --host:--port) instead of running a job; the launcher's "
            "`serve` command sets it.");
DEFINE_string(host, "127.0.0.1", "Serving: the address to listen on (0.0.0.0: every interface).");
DEFINE_int32(port, 8000, "Serving: the port to listen on (0: any free one).");
DEFINE_string(served_model_name, "",
              "Serving: the model's name in the API (requests must name it). Default: the checkpoint folder's "
              "name.");
DEFINE_string(api_key, "",
              "Serving: requests must carry `Authorization: Bearer <key>` (also read from $LLAMA_API_KEY); "
              "/health and /metrics stay open.");
DEFINE_string(api_key_file, "", "Serving: a file of accepted API keys, one per line.");
DEFINE_int32(max_queue, 1024,
             "Serving: requests admitted and not yet scheduled (a hard limit); more get 429 with Retry-After.");
DEFINE_int32(max_connections, 4096,
             "Serving: open HTTP connections; more are answered 503 and closed at once (capped by ulimit -n).");
DEFINE_int32(max_header_bytes, 65536, "Serving: bytes of a request's header block; more get 431.");
DEFINE_int32(max_headers, 100, "Serving: header fields of a request; more get 431.");
DEFINE_int64(max_body_bytes, 8 << 20, "Serving: bytes of a request's body, chunked or not; more get 413.");
DEFINE_int32(request_timeout, 30, "Serving: seconds from a request's first byte to its last; later gets 408.");
DEFINE_int32(keep_alive_timeout, 60,
             "Serving: seconds an idle connection is kept between requests (and a stalled write waits).");
DEFINE_int32(drain_timeout, 30,
             "Serving: seconds the requests in flight may take to finish after SIGTERM or Ctrl-C; the rest are "
             "cancelled.");
DEFINE_string(device, "",
              "Compute backend: cpu or cuda (one GPU per local rank). Default: cuda when the binary has the CUDA "
              "backend and sees a GPU, else cpu.");
DEFINE_string(kv_cache_dtype, "f32",
              "KV cache storage: f32, or bf16/f16 for half the memory (values rounded once when cached; the "
              "reference keeps its cache in the model's 16-bit dtype).");
DEFINE_bool(cuda_graphs, true, "CUDA backend: replay decode steps from captured CUDA graphs (off to compare or debug).");
DEFINE_bool(int8_prefill, false,
            "CPU, int8 weights: prefill with int8 activations as decode does (llama.cpp's Q8_0 way): 1.2-1.5x faster "
            "prefill, a row's results independent of the batch; on the test fixtures the prefill's top token agrees "
            "with the stored weights' at 94.8-95.2% of positions instead of 96.4-97.0%.");
DEFINE_bool(bf16_activations, false,
            "CPU, bf16 weights: round activations to bf16 before each linear layer (llama.cpp's way with BF16), so "
            "that AVX-512 BF16 does two multiply-adds a lane per instruction: 1.4-1.8x faster prefill and ~1.3x "
            "faster batched decode on the bench model; on the test fixtures the top token agrees with f32 "
            "activations' at 98.7-98.8% of positions; results stay independent of the batch. The GPU already "
            "rounds batches' activations to the weights' type.");
DEFINE_int32(threads, 0, "CPU threads per rank; 0: one per hardware thread / LOCAL_WORLD_SIZE.");
DEFINE_int32(rendezvous_timeout, 300, "Seconds to wait for every rank to join.");
DEFINE_int32(load_timeout, 1800, "Seconds to wait for every rank to load its shard.");
DEFINE_int32(collective_timeout, 300, "Seconds a collective may wait for a silent (hung) peer.");

namespace llama {

JobFlags JobFlagsFromCommandLine() {
  JobFlags f;
  f.prompt = FLAGS_prompt;
  f.prompts_file = FLAGS_prompts_file;
  f.dialogs_file = FLAGS_dialogs_file;
  f.output = FLAGS_output;
  f.temperature = FLAGS_temperature;
  f.top_p = FLAGS_top_p;
  f.max_seq_len = FLAGS_max_seq_len;
  f.max_batch_size = FLAGS_max_batch_size;
  f.max_gen_len = FLAGS_max_gen_len;
  f.seed = FLAGS_seed;
  f.logprobs = FLAGS_logprobs;
  f.echo = FLAGS_echo;
  f.max_num_batched_tokens = FLAGS_max_num_batched_tokens;
  f.kv_cache_gb = FLAGS_kv_cache_gb;
  f.kv_cache_free_share = FLAGS_kv_cache_free_share;
  f.kv_block_size = FLAGS_kv_block_size;
  f.enable_prefix_caching = FLAGS_enable_prefix_caching;
  f.serve = FLAGS_serve;
  f.host = FLAGS_host;
  f.port = FLAGS_port;
  f.served_model_name = FLAGS_served_model_name;
  f.api_key = FLAGS_api_key;
  f.api_key_file = FLAGS_api_key_file;
  f.max_queue = FLAGS_max_queue;
  f.max_connections = FLAGS_max_connections;
  f.max_header_bytes = FLAGS_max_header_bytes;
  f.max_headers = FLAGS_max_headers;
  f.max_body_bytes = FLAGS_max_body_bytes;
  f.request_timeout = FLAGS_request_timeout;
  f.keep_alive_timeout = FLAGS_keep_alive_timeout;
  f.drain_timeout = FLAGS_drain_timeout;
  f.device = FLAGS_device;
  f.kv_cache_dtype = FLAGS_kv_cache_dtype;
  f.cuda_graphs = FLAGS_cuda_graphs;
  f.int8_prefill = FLAGS_int8_prefill;
  f.bf16_activations = FLAGS_bf16_activations;
  f.threads = FLAGS_threads;
  f.rendezvous_timeout = FLAGS_rendezvous_timeout;
  f.load_timeout = FLAGS_load_timeout;
  f.collective_timeout = FLAGS_collective_timeout;
  return f;
}

absl::Status CheckJobFlags(const JobFlags& f, bool need_input) {
  const int inputs = !f.prompt.empty() + !f.prompts_file.empty() + !f.dialogs_file.empty();
  if (inputs > 1 || (need_input && inputs == 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("give exactly one of --prompt, --prompts_file, --dialogs_file (%d given)", inputs));
  }
  if (!(f.temperature >= 0) || f.temperature > 1e6) {
    return absl::InvalidArgumentError(absl::StrFormat("--temperature=%g: expected a finite value >= 0", f.temperature));
  }
  if (!(f.top_p > 0 && f.top_p <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("--top_p=%g: expected a value in (0, 1]", f.top_p));
  }
  if (f.max_seq_len < 2) {
    return absl::InvalidArgumentError(absl::StrFormat("--max_seq_len=%d: expected at least 2", f.max_seq_len));
  }
  if (f.max_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("--max_batch_size=%d: expected at least 1", f.max_batch_size));
  }
  if (f.max_gen_len < -1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_gen_len=%d: expected -1 (max_seq_len - 1) or a count >= 0", f.max_gen_len));
  }
  if (f.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_num_batched_tokens=%d: expected at least 1", f.max_num_batched_tokens));
  }
  if (!(f.kv_cache_gb >= 0) || f.kv_cache_gb > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--kv_cache_gb=%g: expected a size in GB >= 0 (0: the default)", f.kv_cache_gb));
  }
  if (!(f.kv_cache_free_share >= 0 && f.kv_cache_free_share <= 0.95)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--kv_cache_free_share=%g: expected a share from 0 to 0.95", f.kv_cache_free_share));
  }
  if (f.kv_cache_free_share > 0 && f.kv_cache_gb > 0) {
    return absl::InvalidArgumentError("give --kv_cache_gb or --kv_cache_free_share, not both");
  }
  if (f.kv_block_size < 1 || f.kv_block_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--kv_block_size=%d: expected 1 to 4096 positions", f.kv_block_size));
  }
  if (f.port < 0 || f.port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat("--port=%d: expected 0 to 65535", f.port));
  }
  if (f.max_queue < 0) return absl::InvalidArgumentError(absl::StrFormat("--max_queue=%d: expected >= 0", f.max_queue));
  for (const auto& [name, value, least] :
       {std::tuple<const char*, int64_t, int64_t>{"max_connections", f.max_connections, 1},
        {"max_header_bytes", f.max_header_bytes, 256},
        {"max_headers", f.max_headers, 1},
        {"max_body_bytes", f.max_body_bytes, 1024},
        {"request_timeout", f.request_timeout, 1},
        {"keep_alive_timeout", f.keep_alive_timeout, 1}}) {
    if (value < least) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s=%d: expected >= %d", name, value, least));
    }
  }
  if (f.drain_timeout < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("--drain_timeout=%d: expected >= 0 seconds", f.drain_timeout));
  }
  if (!f.device.empty()) {
    if (absl::StatusOr<Device> device = ParseDevice(f.device); !device.ok()) return device.status();
  }
  if (absl::StatusOr<DType> cache = ParseFloat16Or32Flag("kv_cache_dtype", f.kv_cache_dtype); !cache.ok()) {
    return cache.status();
  }
  if (f.threads < 0) return absl::InvalidArgumentError(absl::StrFormat("--threads=%d: expected >= 0", f.threads));
  for (const auto& [name, seconds] : {std::pair<const char*, int>{"rendezvous_timeout", f.rendezvous_timeout},
                                      {"load_timeout", f.load_timeout},
                                      {"collective_timeout", f.collective_timeout}}) {
    if (seconds < 1) return absl::InvalidArgumentError(absl::StrFormat("--%s=%d: expected >= 1 second", name, seconds));
  }
  return absl::OkStatus();
}

std::vector<std::string> WorkerArguments(const JobFlags& f) {
  const auto flag = [](const char* name, auto value) { return absl::StrCat("--", name, "=", value); };
  const auto boolean = [](const char* name, bool value) { return absl::StrCat("--", name, "=", value ? "true" : "false"); };
  const auto absolute = [](const std::string& p) { return std::filesystem::absolute(p).string(); };
  std::vector<std::string> args = {
      flag("temperature", absl::StrFormat("%.17g", f.temperature)),
      flag("top_p", absl::StrFormat("%.17g", f.top_p)),
      flag("max_seq_len", f.max_seq_len),
      flag("max_batch_size", f.max_batch_size),
      flag("max_gen_len", f.max_gen_len),
      flag("seed", f.seed),
      boolean("logprobs", f.logprobs),
      boolean("echo", f.echo),
      flag("max_num_batched_tokens", f.max_num_batched_tokens),
      flag("kv_cache_gb", absl::StrFormat("%.17g", f.kv_cache_gb)),
      flag("kv_cache_free_share", absl::StrFormat("%.17g", f.kv_cache_free_share)),
      flag("kv_block_size", f.kv_block_size),
      boolean("enable_prefix_caching", f.enable_prefix_caching),
      boolean("serve", f.serve),
      flag("host", f.host),
      flag("port", f.port),
      flag("max_queue", f.max_queue),
      flag("max_connections", f.max_connections),
      flag("max_header_bytes", f.max_header_bytes),
      flag("max_headers", f.max_headers),
      flag("max_body_bytes", f.max_body_bytes),
      flag("request_timeout", f.request_timeout),
      flag("keep_alive_timeout", f.keep_alive_timeout),
      flag("drain_timeout", f.drain_timeout),
      flag("kv_cache_dtype", f.kv_cache_dtype),
      boolean("cuda_graphs", f.cuda_graphs),
      boolean("int8_prefill", f.int8_prefill),
      boolean("bf16_activations", f.bf16_activations),
      flag("threads", f.threads),
      flag("rendezvous_timeout", f.rendezvous_timeout),
      flag("load_timeout", f.load_timeout),
      flag("collective_timeout", f.collective_timeout),
  };
  if (!f.prompt.empty()) args.push_back(flag("prompt", f.prompt));
  if (!f.prompts_file.empty()) args.push_back(flag("prompts_file", absolute(f.prompts_file)));
  if (!f.dialogs_file.empty()) args.push_back(flag("dialogs_file", absolute(f.dialogs_file)));
  if (!f.output.empty()) args.push_back(flag("output", absolute(f.output)));
  if (!f.served_model_name.empty()) args.push_back(flag("served_model_name", f.served_model_name));
  if (!f.api_key_file.empty()) args.push_back(flag("api_key_file", absolute(f.api_key_file)));
  return args;
}

}  // namespace llama
