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
#include "worker/sampling/sampling_params.h"

namespace llama {

// Where --help lists a job flag; each binary gives the groups its titles.
enum class JobFlagGroup {
  kModelFiles,   // The converted model: shards and tokenizer.
  kInput,        // What to run, and where the results go.
  kGeneration,
  kEngine,
  kServeSwitch,  // The worker's --serve, which the launcher's `serve` command sets.
  kServing,
  kRankModel,    // The model on each rank.
  kDeadlines,    // Between ranks.
};

// How the launcher passes a job flag on to each worker (WorkerArguments).
enum class WorkerForwarding {
  kAlways,
  kIfSet,       // A string, only when not empty.
  kPathIfSet,   // A path, made absolute (a worker does not share the launcher's working directory), when set.
  kPerNode,     // Not passed: the launcher resolves it on each node and passes the result.
  kEnvironment, // A secret: rank 0 gets it in its environment (kApiKeyVariable), not on a command line others read.
};

}  // namespace llama

// Every job flag, once: X(gflags type, name, default, JobFlagGroup,
// WorkerForwarding, help). It generates the flags' definitions and
// declarations, JobFlags, JobFlagsFromCommandLine, WorkerArguments and the
// --help groups. Within a group, --help lists the flags in this order.
#define LLAMA_JOB_FLAGS(X) \
  X(string, tokenizer_path, "", kModelFiles, kPerNode, \
    "tokenizer.model, or Llama 3's Hugging Face tokenizer.json. Launcher default: tokenizer.model in " \
    "--ckpt_dir, next to it (its parent folder, as download.sh lays it out) or in its original/ (a Hugging " \
    "Face Llama 3 folder), else tokenizer.json in --ckpt_dir; required by the worker.") \
  X(string, shard_dir, "", kModelFiles, kPerNode, \
    "Folder of rank-R-of-N.shard files (//tools:convert). Launcher default: <ckpt_dir>/shards/tp<world " \
    "size>, or ~/.cache/llama2-cpp/shards/<checkpoint>-<hash>/tp<world size> when the checkpoint " \
    "folder is read-only; required by the worker.") \
  X(bool, verify_shards, true, kModelFiles, kAlways, \
    "Check every tensor of each rank's shard against the checksum conversion recorded, while loading (one " \
    "more read of the weights); false skips it, for storage already checked.") \
  X(string, prompt, "", kInput, kIfSet, \
    "One prompt for text completion.") \
  X(string, prompts_file, "", kInput, kPathIfSet, \
    "Prompts for text completion: a JSON array of strings, or JSON Lines.") \
  X(string, dialogs_file, "", kInput, kPathIfSet, \
    "Dialogs for chat completion: a JSON array of [{role, content}, ...].") \
  X(string, output, "", kInput, kPathIfSet, \
    "Write one JSON object per prompt or dialog to this file (JSON Lines, by rank 0). Each line names the job " \
    "(model, weight types, tokenizer, prompts, generation flags); a rerun of the same job resumes the file, " \
    "another job's file is refused.") \
  X(bool, overwrite_output, false, kInput, kAlways, \
    "Start --output afresh even if it holds answers (of this or another job); the old file stays whole " \
    "until the new job has its first answer.") \
  X(string, json_schema, "", kInput, kPathIfSet, \
    "Structured output: every answer is JSON valid against this JSON Schema file (constrained decoding).") \
  X(double, temperature, llama::kDefaultTemperature, kGeneration, kAlways, \
    "Sampling temperature, in [0, 2]; 0 is greedy.") \
  X(double, top_p, llama::kDefaultTopP, kGeneration, kAlways, \
    "Top-p (nucleus) sampling threshold, in (0, 1].") \
  X(double, typical_p, llama::kDefaultTypicalP, kGeneration, kAlways, \
    "Locally typical sampling mass, in (0, 1]: after --top_p, keep the tokens whose surprisal is nearest the " \
    "entropy up to this probability (Hugging Face's typical_p); 1 is off.") \
  X(int32, max_seq_len, 0, kGeneration, kAlways, \
    "Longest sequence (prompt + generation). 0: the model's own context (params.json's or config.json's; " \
    "else Llama 2 4096, Llama 3 8192, Llama 3.1 and later 131072), shortened to what the free memory's KV " \
    "cache holds unless --kv_cache_gb or --kv_cache_free_share sizes it.") \
  X(int32, max_gen_len, -1, kGeneration, kAlways, \
    "Most tokens to generate per prompt; -1: max_seq_len - 1, as the reference.") \
  X(int32, max_batch_size, 4, kGeneration, kAlways, \
    "Most sequences in flight at once; a finished one's place goes to the next prompt (continuous " \
    "batching).") \
  X(uint64, seed, 1, kGeneration, kAlways, \
    "Sampling seed (rank 0's is the one that counts).") \
  X(bool, logprobs, false, kGeneration, kAlways, \
    "Report each generated token's log-probability.") \
  X(bool, echo, false, kGeneration, kAlways, \
    "Include the prompt tokens in the output.") \
  X(int32, max_num_batched_tokens, 512, kEngine, kAlways, \
    "Most tokens per model step: decodes first, then pieces of prompts up to this budget (at least " \
    "--max_batch_size is used).") \
  X(double, kv_cache_gb, 0, kEngine, kAlways, \
    "KV cache per rank, in GB (1e9 bytes), as blocks of --kv_block_size positions shared by every " \
    "sequence; 0: --max_batch_size x --max_seq_len positions.") \
  X(double, kv_cache_free_share, 0, kEngine, kAlways, \
    "KV cache per rank as this share (0 to 0.95) of the memory free once the weights and work buffers " \
    "are counted (RAM on the CPU, the GPU's memory on CUDA); every rank takes the smallest such cache " \
    "of all. 0: --kv_cache_gb decides.") \
  X(int32, kv_block_size, 16, kEngine, kAlways, \
    "Positions per KV cache block (paged attention).") \
  X(bool, enable_prefix_caching, true, kEngine, kAlways, \
    "Reuse the KV blocks of a prompt prefix already computed (a shared system prompt is prefilled once).") \
  X(bool, speculative_ngram, false, kEngine, kAlways, \
    "Speculative decoding by n-gram lookup: guess what follows from the latest earlier occurrence of the " \
    "text's last 1 to 4 tokens (in the prompt or the answer so far) and verify the guesses with the step that feeds the last token; " \
    "answers that copy or repeat come several tokens a step. On CPUs the answers stay those of plain " \
    "decoding, bit for bit.") \
  X(string, draft_shard_dir, "", kEngine, kPathIfSet, \
    "Speculative decoding by a draft model: a folder of converted shards for one rank (//tools:convert " \
    "--world_size=1) of a smaller model with the same vocabulary, or of this model converted again to a " \
    "smaller --weights_dtype (self-speculation). Rank 0 runs it beside its share of the model and " \
    "verifies its greedy guesses; on CPUs the answers stay those of plain decoding, bit for bit.") \
  X(int32, num_speculative_tokens, 4, kEngine, kAlways, \
    "Speculative decoding: most guessed tokens per request and step, 1 to 16.") \
  X(bool, speculation_priced, true, kEngine, kAlways, \
    "Speculative decoding: guess only as far as guesses are expected to pay for their rows and drafting, " \
    "from the measured cost of the engine's steps and how often each request's guesses held; false: " \
    "every guess found, up to --num_speculative_tokens (vLLM's fixed number; to measure acceptance).") \
  X(bool, serve, false, kServeSwitch, kAlways, \
    "Worker: serve the OpenAI API (rank 0 on --host:--port) instead of running a job; the launcher's " \
    "`serve` command sets it.") \
  X(string, host, "127.0.0.1", kServing, kAlways, \
    "Serving: the address to listen on (0.0.0.0: every interface).") \
  X(int32, port, 8000, kServing, kAlways, \
    "Serving: the port to listen on (0: any free one).") \
  X(string, served_model_name, "", kServing, kIfSet, \
    "Serving: the model's name in the API (requests must name it). Default: the checkpoint folder's " \
    "name.") \
  X(string, api_key, "", kServing, kEnvironment, \
    "Serving: requests must carry `Authorization: Bearer <key>` (also read from $LLAMA_API_KEY); " \
    "/health and /metrics stay open.") \
  X(string, api_key_file, "", kServing, kPathIfSet, \
    "Serving: a file of accepted API keys, one per line.") \
  X(int32, max_queue, 1024, kServing, kAlways, \
    "Serving: requests admitted and not yet scheduled (a hard limit); more get 429 with Retry-After.") \
  X(int32, max_connections, 4096, kServing, kAlways, \
    "Serving: open HTTP connections; more are answered 503 and closed at once (capped by ulimit -n).") \
  X(int32, max_header_bytes, 65536, kServing, kAlways, \
    "Serving: bytes of a request's header block; more get 431.") \
  X(int32, max_headers, 100, kServing, kAlways, \
    "Serving: header fields of a request; more get 431.") \
  X(int64, max_body_bytes, 8 << 20, kServing, kAlways, \
    "Serving: bytes of a request's body, chunked or not; more get 413.") \
  X(int32, request_timeout, 30, kServing, kAlways, \
    "Serving: seconds from a request's first byte to its last; later gets 408.") \
  X(int32, keep_alive_timeout, 60, kServing, kAlways, \
    "Serving: seconds an idle connection is kept between requests (and a stalled write waits).") \
  X(bool, access_log, false, kServing, kAlways, \
    "Serving: one log line per request (client address, method, path, status, answer bytes, " \
    "milliseconds; never headers or bodies).") \
  X(int32, drain_timeout, 30, kServing, kAlways, \
    "Serving: seconds the requests in flight may take to finish after SIGTERM or Ctrl-C; the rest are " \
    "cancelled.") \
  X(string, device, "", kRankModel, kPerNode, \
    "Compute backend: cpu or cuda (one GPU per local rank). Default: cuda when the binary has the CUDA " \
    "backend and sees a GPU, else cpu.") \
  X(string, kv_cache_dtype, "f32", kRankModel, kAlways, \
    "KV cache storage: f32, or bf16/f16 for half the memory (values rounded once when cached; the " \
    "reference keeps its cache in the model's 16-bit dtype).") \
  X(bool, cuda_graphs, true, kRankModel, kAlways, \
    "CUDA backend: replay decode steps from captured CUDA graphs (off to compare or debug).") \
  X(bool, int8_prefill, true, kRankModel, kAlways, \
    "CPU, int8 (q8_0), q4_k and q6_k weights: prefill with activations quantized to int8 per row, as decode " \
    "does and llama.cpp does, so that a row's results never depend on its batch. On a trained model " \
    "(tools/train_tiny_llama.py) perplexity moves by 0.002% (q8_0) and 0.001% (Q4_K_M) from f32 " \
    "activations'; q8_0 prefill of 512 tokens is 1.1-1.2x faster, q4_k/q6_k's 0.92x on a Xeon " \
    "(docs/performance.md). false: f32 activations at prefill (int8 and K-quant rows then change in the " \
    "last bits when their batch crosses 12 rows).") \
  X(bool, bf16_activations, false, kRankModel, kAlways, \
    "CPU, bf16 weights: round activations to bf16 before each linear layer (llama.cpp's way with BF16), so " \
    "that AVX-512 BF16 does two multiply-adds a lane per instruction: 1.4-1.8x faster prefill and ~1.3x " \
    "faster batched decode on the bench model; on the test fixtures the top token agrees with f32 " \
    "activations' at 98.7-98.8% of positions; results stay independent of the batch. On CPUs with AMX, " \
    "int8, q4_k and q6_k weights too: their prefill (over 12 rows; ahead of --int8_prefill) goes " \
    "through bf16 tiles, x and the decoded weights rounded to bf16 (Q4_K_M prefill 1.8x faster on a " \
    "Xeon; rows of 12 or fewer keep the integer kernels, so these rows do depend on their batch). The GPU already " \
    "rounds batches' activations to the weights' type.") \
  X(int32, threads, 0, kRankModel, kAlways, \
    "CPU threads per rank; 0: one per hardware thread / LOCAL_WORLD_SIZE.") \
  X(int32, rendezvous_timeout, 300, kDeadlines, kAlways, \
    "Seconds to wait for every rank to join.") \
  X(int32, load_timeout, 1800, kDeadlines, kAlways, \
    "Seconds to wait for every rank to load its shard.") \
  X(int32, collective_timeout, 300, kDeadlines, kAlways, \
    "Seconds a collective may wait for a silent (hung) peer.")

// The C++ type of each gflags type, for the fields of JobFlags (and of
// other flag tables' structs).
#define LLAMA_FLAG_CPP_TYPE_string std::string
#define LLAMA_FLAG_CPP_TYPE_double double
#define LLAMA_FLAG_CPP_TYPE_bool bool
#define LLAMA_FLAG_CPP_TYPE_int32 int32_t
#define LLAMA_FLAG_CPP_TYPE_int64 int64_t
#define LLAMA_FLAG_CPP_TYPE_uint64 uint64_t

#define LLAMA_DECLARE_JOB_FLAG(type, name, default_value, group, forwarding, help) DECLARE_##type(name);
LLAMA_JOB_FLAGS(LLAMA_DECLARE_JOB_FLAG)
#undef LLAMA_DECLARE_JOB_FLAG

namespace llama {

struct JobFlags {
#define LLAMA_JOB_FLAG_FIELD(type, name, default_value, group, forwarding, help) \
  LLAMA_FLAG_CPP_TYPE_##type name = default_value;
  LLAMA_JOB_FLAGS(LLAMA_JOB_FLAG_FIELD)
#undef LLAMA_JOB_FLAG_FIELD
};

// The flags as given on this binary's command line.
JobFlags JobFlagsFromCommandLine();

// Ranges and combinations, each error naming the flag: at most one of
// --prompt / --prompts_file / --dialogs_file (exactly one when
// `need_input`), sampling ranges (SamplingParams'), lengths, sizes, the KV
// cache type, positive deadlines.
absl::Status CheckJobFlags(const JobFlags& flags, bool need_input);

// The sampling flags as the batch job's SamplingParams.
SamplingParams JobSamplingParams(const JobFlags& flags);

// The worker arguments that carry `flags` ("--name=value"), as each flag's
// WorkerForwarding says: every flag but --device, --tokenizer_path and
// --shard_dir (kPerNode) and --api_key (kEnvironment).
std::vector<std::string> WorkerArguments(const JobFlags& flags);

// The names of `group`'s flags, in the table's order, for --help.
std::vector<std::string> JobFlagNames(JobFlagGroup group);

// Where a worker finds the API key when --api_key is not given.
inline constexpr char kApiKeyVariable[] = "LLAMA_API_KEY";

}  // namespace llama

#endif  // LLAMA_WORKER_JOB_FLAGS_H_
