// What a batch job's answers depend on, written into each line of its
// --output so that a rerun into the same file resumes only the same job: a
// rerun with another model, another conversion of it, another tokenizer or
// other generation flags must never present the old answers as its own.
//
// The identity is a JSON object of named fields, not a bare hash, so that a
// refusal can say which input changed ("weight dtypes differ (this job: f32
// ...; the file's: q8_0 ...)"). Fields that cannot change the answers are
// left out: the ranks and tensor-parallel degree (answers are identical at
// every degree), threads, batch sizes, the KV cache's size and block size,
// prefix caching (each row's results do not depend on its batch).

#ifndef LLAMA_WORKER_JOB_IDENTITY_H_
#define LLAMA_WORKER_JOB_IDENTITY_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "checkpoint/shard_format.h"
#include "worker/job.h"

namespace llama {

// Everything a batch job's answers depend on, as the worker has it before
// loading any weights.
struct JobInputs {
  const shard::ShardIndex* shard_index = nullptr;  // Any rank's: only what every rank shares is read.
  std::string tokenizer_path;
  const Job* job = nullptr;
  std::string chat_format;  // "llama2" or "llama3" for a chat job; empty for text completion.
  std::string device;       // "cpu" or "cuda": their kernels round differently.
  std::string kv_cache_dtype;
  bool int8_prefill = true;
  bool bf16_activations = false;
  double temperature = 0;
  double top_p = 0;
  double typical_p = 1;
  int32_t max_gen_len = 0;
  uint64_t seed = 0;
  bool logprobs = false;
  bool echo = false;
  std::string grammar;  // GBNF from --json_schema; empty: none.
};

class JobIdentity {
 public:
  // Reads the tokenizer file to digest it; errors name it.
  static absl::StatusOr<JobIdentity> Of(const JobInputs& inputs);
  // A line's "job" value as written by fields(); an error for anything else
  // (an older worker wrote a bare hash string).
  static absl::StatusOr<JobIdentity> FromJson(const nlohmann::json& recorded);

  // This identity with the context the job runs at: --max_seq_len, or
  // with 0 the model's own shortened to what the KV cache holds, which
  // memory and the cache flags decide once the rank is planned. A
  // completion that reaches it ends there, so it decides answers too.
  JobIdentity WithContext(int64_t positions) const;

  const nlohmann::ordered_json& fields() const { return fields_; }

  // Empty when `other` is the same job; else the first field that differs,
  // as "model shards differ (this job: ...; the file's: ...)". Before
  // WithContext, `other`'s context is left to the check after planning.
  std::string FirstDifference(const JobIdentity& other) const;

 private:
  explicit JobIdentity(nlohmann::ordered_json fields) : fields_(std::move(fields)) {}
  nlohmann::ordered_json fields_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_JOB_IDENTITY_H_
