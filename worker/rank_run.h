// One rank of a job, as //worker runs it: reads its place from torchrun's
// variables (RANK, WORLD_SIZE, MASTER_ADDR, ...; none means a single rank),
// joins its peers, maps its shard, and runs the batch job or the server on
// rank 0 while the other ranks follow rank 0's steps.

#ifndef LLAMA_WORKER_RANK_RUN_H_
#define LLAMA_WORKER_RANK_RUN_H_

#include <string>

#include "absl/status/status.h"
#include "worker/job_flags.h"

namespace llama {

// The rank's whole run under `flags`; rank 0 writes the run's numbers to
// `summary_file` as JSON when it is not empty. OK, or the error to exit
// with (base/exit_code.h): a batch job whose prompts could not all run is
// Aborted, naming how many, after the others' answers are kept.
absl::Status RunRank(const JobFlags& flags, const std::string& summary_file);

}  // namespace llama

#endif  // LLAMA_WORKER_RANK_RUN_H_
