#include "worker/batch_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_format.h"
#include "base/progress_line.h"
#include "base/status_macros.h"
#include "worker/batch/generator.h"
#include "worker/engine_flags.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/token_matcher.h"
#include "worker/sampling/sampling_params.h"

namespace llama {
namespace {

SamplingOptions SamplingFromFlags(const JobFlags& flags) {
  SamplingOptions sampling;
  sampling.sampling = JobSamplingParams(flags);
  if (flags.max_gen_len >= 0) sampling.max_gen_len = flags.max_gen_len;
  sampling.logprobs = flags.logprobs;
  sampling.echo = flags.echo;
  return sampling;
}

// Rank 0 prints and writes each batch as it finishes: Ctrl-C or a later
// failure keeps what is done, and a long job shows its progress. A prompt
// that could not run is reported and written as an error line.
class BatchResults {
 public:
  BatchResults(const Job& job, bool logprobs, BatchOutput output)
      : job_(job), logprobs_(logprobs), output_(std::move(output)), start_(std::chrono::steady_clock::now()) {}

  // `first` counts in todo().
  absl::Status Keep(size_t first, absl::Span<const Completion> batch) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Completion& c = batch[i];
      const size_t index = output_.todo[first + i];
      if (c.status.ok()) {
        tokens_ += c.token_ids.size();
        std::fputs((job_.chat ? FormatChatCompletion(job_.dialogs[index], c)
                              : FormatTextCompletion(job_.prompts[index], c))
                       .c_str(),
                   stdout);
      } else {
        ++failed_;
        std::fprintf(stderr, "error: %s %zu cannot run: %s\n", job_.chat ? "dialog" : "prompt", index,
                     std::string(c.status.message()).c_str());
      }
      lines.push_back(ResultLine(index, *output_.job, c, job_.chat, logprobs_));
    }
    std::fflush(stdout);
    if (output_.file) RETURN_IF_ERROR(output_.file->Append(lines));
    std::fprintf(stderr, "%s%zu/%zu %s done, %zu tokens generated, %.1f tokens/s\n", kProgressPrefix,
                 total() - output_.todo.size() + first + batch.size(), total(), kind(), tokens_,
                 tokens_ / std::max(seconds(), 1e-9));
    std::fflush(stderr);
    return absl::OkStatus();
  }

  // The job's end: an error saying how many prompts failed, if any did.
  // Aborted, not InvalidArgument: the job ran and kept the other answers,
  // so it exits 1 as the launcher does for it, not 2 (base/exit_code.h).
  absl::Status Outcome() const {
    if (failed_ == 0) return absl::OkStatus();
    return absl::AbortedError(absl::StrFormat(
        "%zu of %zu %s could not run (above, and as \"error\" lines%s); the others completed", failed_, total(),
        kind(), output_.file ? " in --output" : ""));
  }

  const std::vector<size_t>& todo() const { return output_.todo; }
  size_t total() const { return job_.chat ? job_.dialogs.size() : job_.prompts.size(); }
  size_t tokens() const { return tokens_; }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  const char* kind() const { return job_.chat ? "dialogs" : "prompts"; }

  const Job& job_;
  const bool logprobs_;
  const BatchOutput output_;
  const std::chrono::steady_clock::time_point start_;
  size_t tokens_ = 0;
  size_t failed_ = 0;
};

}  // namespace

absl::StatusOr<JobIdentity> BatchJobIdentity(const JobFlags& flags, const Job& job, const std::string& grammar,
                                             const shard::ShardIndex& shard_index, const Tokenizer& tokenizer,
                                             Device device) {
  JobInputs inputs;
  inputs.shard_index = &shard_index;
  inputs.tokenizer_path = flags.tokenizer_path;
  inputs.job = &job;
  if (job.chat) inputs.chat_format = tokenizer.family() == Tokenizer::Family::kTiktoken ? "llama3" : "llama2";
  inputs.device = std::string(DeviceName(device));
  inputs.kv_cache_dtype = flags.kv_cache_dtype;
  inputs.int8_prefill = flags.int8_prefill;
  inputs.bf16_activations = flags.bf16_activations;
  inputs.temperature = flags.temperature;
  inputs.top_p = flags.top_p;
  inputs.typical_p = flags.typical_p;
  // The job's flags name temperature, top_p and typical_p of TokenSampling
  // (the API's top_k and min_p stay at their defaults here): a new field
  // changes this size, and its flag must join the identity above.
  static_assert(sizeof(TokenSampling) == 20, "a new sampling field: add its flag to the job's identity");
  inputs.max_gen_len = flags.max_gen_len;
  inputs.seed = flags.seed;
  inputs.logprobs = flags.logprobs;
  inputs.echo = flags.echo;
  inputs.grammar = grammar;
  return JobIdentity::Of(inputs);
}

absl::Status CheckBatchOutput(const JobFlags& flags, const JobIdentity& identity, const Job& job) {
  if (flags.output.empty() || flags.overwrite_output) return absl::OkStatus();
  return ResumeResults(flags.output, identity, job.chat ? job.dialogs.size() : job.prompts.size()).status();
}

absl::StatusOr<BatchOutput> OpenBatchOutput(const JobFlags& flags, JobIdentity identity, const Job& job) {
  const size_t total = job.chat ? job.dialogs.size() : job.prompts.size();
  BatchOutput output;
  PreviousResults previous;
  if (!flags.output.empty()) {
    if (!flags.overwrite_output) {
      ASSIGN_OR_RETURN(previous, ResumeResults(flags.output, identity, total));
    }
    ASSIGN_OR_RETURN(output.file, ResultsFile::Create(flags.output, previous.lines));
  }
  output.job = std::move(identity);
  for (size_t i = 0; i < total; ++i) {
    if (previous.done.count(i) == 0) output.todo.push_back(i);
  }
  if (!previous.done.empty()) {
    std::fprintf(stderr, "%sresuming: %zu of %zu %s done (in %s)\n", kProgressPrefix, previous.done.size(), total,
                 job.chat ? "dialogs" : "prompts", flags.output.c_str());
    std::fflush(stderr);
  }
  return output;
}


absl::StatusOr<BatchJobRun> RunBatchJob(const JobFlags& flags, const Job& job, const std::string& grammar,
                                         BatchOutput output, LanguageModel& model, Tokenizer& tokenizer,
                                         LanguageModel* draft) {
  Generator generator(&model, &tokenizer, tokenizer.stop_ids(), EngineOptionsFromFlags(flags, draft));
  SamplingOptions sampling = SamplingFromFlags(flags);
  if (!grammar.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> compiled, grammar::Grammar::Parse(grammar));
    sampling.grammar =
        std::make_shared<grammar::TokenAutomaton>(std::move(compiled), grammar::TokenTrie::ForTokenizer(tokenizer));
  }
  BatchResults results(job, flags.logprobs, std::move(output));
  LOG(INFO) << "generating for " << results.todo().size() << (job.chat ? " dialog(s)" : " prompt(s)");
  if (!results.todo().empty()) {
    BatchSelection selection;
    selection.indices = results.todo();
    selection.each_alone = true;
    const auto keep = [&](size_t first, absl::Span<const Completion> batch) { return results.Keep(first, batch); };
    std::vector<std::string> prompts;
    std::vector<Dialog> dialogs;
    for (size_t i : results.todo()) {
      if (job.chat) {
        dialogs.push_back(job.dialogs[i]);
      } else {
        prompts.push_back(job.prompts[i]);
      }
    }
    RETURN_IF_ERROR((job.chat ? generator.ChatCompletion(dialogs, sampling, keep, selection)
                              : generator.TextCompletion(prompts, sampling, keep, selection))
                        .status());
  }
  BatchJobRun run;
  run.tokens = results.tokens();
  run.seconds = results.seconds();
  run.engine = generator.engine_stats();
  run.failed_prompts = results.Outcome();
  return run;
}


}  // namespace llama
