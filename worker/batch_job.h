// A batch job on rank 0: the prompts or dialogs its --output still lacks
// (a rerun of the same job resumes the file, another job's is refused
// before any weights load), run through the engine, each batch's answers
// printed as the reference's scripts print them and written to --output as
// it finishes.

#ifndef LLAMA_WORKER_BATCH_JOB_H_
#define LLAMA_WORKER_BATCH_JOB_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/shard_format.h"
#include "ops/device.h"
#include "tokenizer/tokenizer.h"
#include "worker/engine/engine.h"
#include "worker/job.h"
#include "worker/job_flags.h"
#include "worker/job_identity.h"
#include "worker/model/language_model.h"
#include "worker/results.h"

namespace llama {

// What the job's answers depend on (worker/job_identity.h), from what rank
// 0 has before loading: a shard's index, the tokenizer, the flags, the
// --json_schema's grammar (empty: none).
absl::StatusOr<JobIdentity> BatchJobIdentity(const JobFlags& flags, const Job& job, const std::string& grammar,
                                             const shard::ShardIndex& shard_index, const Tokenizer& tokenizer,
                                             Device device);

// The prompts a batch job still has to run: all, or on a rerun of the same
// job into the same --output those without an answer there.
struct BatchOutput {
  std::optional<JobIdentity> job;
  std::vector<size_t> todo;
  std::unique_ptr<ResultsFile> file;  // Null without --output.
};

// Refuses an --output of another job (unless --overwrite_output), before
// the weights load: everything but the context, which planning decides
// (JobIdentity::WithContext), is compared.
absl::Status CheckBatchOutput(const JobFlags& flags, const JobIdentity& identity, const Job& job);

// --output read (unless --overwrite_output) and opened for `identity`'s job,
// its context included; says on stderr how many answers a resumed file
// keeps.
absl::StatusOr<BatchOutput> OpenBatchOutput(const JobFlags& flags, JobIdentity identity, const Job& job);

struct BatchJobRun {
  size_t tokens = 0;     // Generated.
  double seconds = 0;    // Generating.
  EngineStats engine;    // The engine's counters (speculative guesses among them).
  // The prompts that could not run, named (Aborted: the job ran and kept
  // the others' answers), or OK.
  absl::Status failed_prompts;
};

// Runs what `output` has still to do through `model` (rank 0's: a
// LeaderModel when there are other ranks), each prompt failing alone. An
// error is the job's own failure (the engine's, or --output's disk).
// `draft`: --draft_shard_dir's model, or null.
absl::StatusOr<BatchJobRun> RunBatchJob(const JobFlags& flags, const Job& job, const std::string& grammar,
                                         BatchOutput output, LanguageModel& model, Tokenizer& tokenizer,
                                         LanguageModel* draft = nullptr);

}  // namespace llama

#endif  // LLAMA_WORKER_BATCH_JOB_H_
