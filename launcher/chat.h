// `launcher chat`: an interactive chat in the terminal with the model the
// flags choose, on the same ranks as a job. The workers serve the API on a
// private port (loopback, a random key), and this is its client: each
// answer streams as it is generated, the dialog's history is kept (in the
// model's chat format, Llama 2's or 3's, its oldest turns dropped when it
// outgrows the context), /reset clears it, /exit (or end of input) leaves. Ctrl-C stops the current answer, not the program. With
// stdin not a terminal, each line is a user turn and no prompt is shown,
// for scripts.

#ifndef LLAMA_LAUNCHER_CHAT_H_
#define LLAMA_LAUNCHER_CHAT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/supervisor.h"
#include "worker/sampling/sampling_params.h"

namespace llama {

struct ChatSessionOptions {
  std::string model;
  std::string api_key;
  std::string system_prompt;
  // The job's (JobSamplingParams): each turn asks for its temperature,
  // top_p, typical_p and seed.
  SamplingParams sampling;
  int max_tokens = -1;  // -1: to the end of the context.
  FILE* in = stdin;
  FILE* out = stdout;
};

// Starts the workers (`supervise` as for a job), chats until /exit or end of
// input, then stops them; an error when the job failed or its server never
// came up.
absl::Status RunChatSession(const std::vector<WorkerLaunch>& workers, SupervisorOptions supervise,
                   const ChatSessionOptions& options);

}  // namespace llama

#endif  // LLAMA_LAUNCHER_CHAT_H_
