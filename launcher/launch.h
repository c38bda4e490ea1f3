// What the launcher does once its flags are read and planned
// (launcher/launch_plan.h): download, submit to SLURM, or obtain and check
// the checkpoint, prepare its shards, start one worker per local rank and
// supervise them (a batch job, a server or a chat), then report the outcome.

#ifndef LLAMA_LAUNCHER_LAUNCH_H_
#define LLAMA_LAUNCHER_LAUNCH_H_

#include "absl/status/status.h"
#include "launcher/launch_plan.h"

namespace llama {

// This process's view for PlanLaunch: its environment, the GPUs it sees,
// whether it was built with CUDA, its cache folder, the time and pid.
LaunchContext CurrentContext();

// Does what `plan` says: OK, Cancelled when interrupted, or the error to
// report (a rank that failed comes as Internal, naming it, its exit status
// and its log's last line).
absl::Status Execute(LaunchPlan plan);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_LAUNCH_H_
