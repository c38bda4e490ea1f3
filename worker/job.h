// A job: the prompts or dialogs to complete. Rank 0 reads it from the
// flags' files and hands it to the other ranks through the rendezvous
// store, so only rank 0 needs the input files.

#ifndef LLAMA_WORKER_JOB_H_
#define LLAMA_WORKER_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/chat_format.h"

namespace llama {

struct Job {
  bool chat = false;
  std::vector<std::string> prompts;
  std::vector<Dialog> dialogs;
};

// Exactly one source: a prompt, a prompts file or a dialogs file.
absl::StatusOr<Job> ReadJob(const std::string& prompt, const std::string& prompts_file,
                            const std::string& dialogs_file);

std::string SerializeJob(const Job& job);
// Never throws: a malformed message is an error naming the field.
// --json_schema's file as the GBNF grammar answers must follow
// (worker/grammar/json_schema.h); errors name the flag, the file and, for
// what cannot be compiled, the keyword and where it is.
absl::StatusOr<std::string> ReadJsonSchemaGrammar(const std::string& path);

absl::StatusOr<Job> DeserializeJob(const std::string& text);

}  // namespace llama

#endif  // LLAMA_WORKER_JOB_H_
