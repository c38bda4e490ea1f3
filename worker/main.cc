// //worker: one rank of a Llama 2 job.
//
// Reads its place in the job from torchrun's variables (RANK, WORLD_SIZE,
// MASTER_ADDR, ...; none means a single rank), maps its shard, joins its
// peers, and runs text or chat completion; rank 0 prints the results as the
// reference's example scripts do and writes --output as JSON Lines.
//
//   worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt="I believe the meaning of life is"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/status/status.h"
#include "base/exit_code.h"
#include "worker/flag_help.h"
#include "worker/job_flags.h"
#include "worker/rank_run.h"

DEFINE_string(summary_file, "", "Rank 0 writes the run's numbers here as JSON (ranks, load and generation time, tokens).");

int main(int argc, char** argv) {
  const char* usage =
      "One rank of a Llama 2 job. Alone:\n"
      "  worker --shard_dir=DIR --tokenizer_path=tokenizer.model --prompt=\"...\"\n"
      "Under //launcher (or torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/RENDEZVOUS_TOKEN),\n"
      "each rank maps DIR/rank-R-of-N.shard and rank 0 prints the results.\n"
      "Exit status: 0, 1 when the run failed, 2 when the input is wrong (as the launcher's: launcher --help).";
  using llama::JobFlagGroup;
  using llama::JobFlagNames;
  llama::HandleHelpAndVersion(
      argc, argv, "worker", usage,
      {{"The model and the job", llama::FlagList({JobFlagNames(JobFlagGroup::kModelFiles),
                                                  JobFlagNames(JobFlagGroup::kInput), {"summary_file"}})},
       {"Generation", JobFlagNames(JobFlagGroup::kGeneration)},
       {"The engine", JobFlagNames(JobFlagGroup::kEngine)},
       {"Serving", llama::FlagList({JobFlagNames(JobFlagGroup::kServeSwitch), JobFlagNames(JobFlagGroup::kServing)})},
       {"This rank's model", JobFlagNames(JobFlagGroup::kRankModel)},
       {"Deadlines between ranks", JobFlagNames(JobFlagGroup::kDeadlines)},
       {"Logging", {"log_dir"}}});
  gflags::SetUsageMessage(usage);
  llama::ParseFlags(&argc, &argv);
  if (FLAGS_serve) {
    // Every thread inherits the mask: rank 0 takes SIGTERM and SIGINT as a
    // drain (sigtimedwait), the other ranks as nothing (they end when rank 0
    // tells them, or dies).
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::Status status = llama::RunRank(llama::JobFlagsFromCommandLine(), FLAGS_summary_file);
  if (!status.ok()) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "worker rank %s: %s\n", rank != nullptr ? rank : "0", std::string(status.message()).c_str());
  }
  return llama::ExitCodeFor(status);
}
