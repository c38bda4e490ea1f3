#include "worker/job_flags.h"

#include <filesystem>
#include <tuple>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/device.h"
#include "ops/dtype.h"

#define LLAMA_DEFINE_JOB_FLAG(type, name, default_value, group, forwarding, help) \
  DEFINE_##type(name, default_value, help);
LLAMA_JOB_FLAGS(LLAMA_DEFINE_JOB_FLAG)
#undef LLAMA_DEFINE_JOB_FLAG

namespace llama {

namespace {

// A flag's value as the worker's command line spells it: doubles to the
// last bit, bools as words.
std::string ArgumentValue(double value) { return absl::StrFormat("%.17g", value); }
std::string ArgumentValue(bool value) { return value ? "true" : "false"; }
template <typename T>
std::string ArgumentValue(const T& value) {
  return absl::StrCat(value);
}

template <typename T>
void AppendWorkerArgument(const char* name, const T& value, WorkerForwarding forwarding,
                          std::vector<std::string>& args) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (value.empty() && (forwarding == WorkerForwarding::kIfSet || forwarding == WorkerForwarding::kPathIfSet)) return;
    if (forwarding == WorkerForwarding::kPathIfSet) {
      args.push_back(absl::StrCat("--", name, "=", std::filesystem::absolute(value).string()));
      return;
    }
  }
  if (forwarding == WorkerForwarding::kPerNode || forwarding == WorkerForwarding::kEnvironment) return;
  args.push_back(absl::StrCat("--", name, "=", ArgumentValue(value)));
}

}  // namespace

JobFlags JobFlagsFromCommandLine() {
  JobFlags flags;
#define LLAMA_COPY_JOB_FLAG(type, name, default_value, group, forwarding, help) flags.name = FLAGS_##name;
  LLAMA_JOB_FLAGS(LLAMA_COPY_JOB_FLAG)
#undef LLAMA_COPY_JOB_FLAG
  return flags;
}

absl::Status CheckJobFlags(const JobFlags& f, bool need_input) {
  const int inputs = !f.prompt.empty() + !f.prompts_file.empty() + !f.dialogs_file.empty();
  if (inputs > 1 || (need_input && inputs == 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("give exactly one of --prompt, --prompts_file, --dialogs_file (%d given)", inputs));
  }
  for (const auto& [range, value] :
       {std::pair<const SamplingRange&, double>{kTemperatureRange, f.temperature}, {kTopPRange, f.top_p},
        {kTypicalPRange, f.typical_p}}) {
    if (!range.Contains(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s=%g: expected a value in %s", range.name, value, range.Interval()));
    }
  }
  if (f.max_seq_len != 0 && f.max_seq_len < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_seq_len=%d: expected 0 (the model's own) or at least 2", f.max_seq_len));
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
  if (f.speculative_ngram && !f.draft_shard_dir.empty()) {
    return absl::InvalidArgumentError(
        "give one source of speculative guesses: --speculative_ngram or --draft_shard_dir, not both");
  }
  if (f.num_speculative_tokens < 1 || f.num_speculative_tokens > 16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--num_speculative_tokens=%d: expected 1 to 16", f.num_speculative_tokens));
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

SamplingParams JobSamplingParams(const JobFlags& flags) {
  SamplingParams sampling;
  sampling.token.temperature = static_cast<float>(flags.temperature);
  sampling.token.top_p = static_cast<float>(flags.top_p);
  sampling.token.typical_p = static_cast<float>(flags.typical_p);
  sampling.seed = flags.seed;
  return sampling;
}

std::vector<std::string> WorkerArguments(const JobFlags& flags) {
  std::vector<std::string> args;
#define LLAMA_FORWARD_JOB_FLAG(type, name, default_value, group, forwarding, help) \
  AppendWorkerArgument(#name, flags.name, WorkerForwarding::forwarding, args);
  LLAMA_JOB_FLAGS(LLAMA_FORWARD_JOB_FLAG)
#undef LLAMA_FORWARD_JOB_FLAG
  return args;
}

std::vector<std::string> JobFlagNames(JobFlagGroup group) {
  std::vector<std::string> names;
#define LLAMA_JOB_FLAG_NAME(type, name, default_value, flag_group, forwarding, help) \
  if (JobFlagGroup::flag_group == group) names.push_back(#name);
  LLAMA_JOB_FLAGS(LLAMA_JOB_FLAG_NAME)
#undef LLAMA_JOB_FLAG_NAME
  return names;
}

}  // namespace llama
