// How a job's results leave the worker: text on stdout as the reference's
// example scripts print it, and JSON Lines shaped like the reference's
// return values plus token ids.

#ifndef LLAMA_WORKER_RESULTS_H_
#define LLAMA_WORKER_RESULTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tokenizer/chat_format.h"
#include "worker/batch/generator.h"

namespace llama {

// example_text_completion.py: the prompt, "> " and the generation, a rule.
std::string FormatTextCompletion(const std::string& prompt, const Completion& completion);

// example_chat_completion.py: each message as "Role: content", then
// "> Assistant: ..." and a rule.
std::string FormatChatCompletion(const Dialog& dialog, const Completion& completion);

// {"generation": ..., "token_ids": [...]} plus "tokens" and "logprobs" with
// logprobs; for chat, generation is {"role": "assistant", "content": ...}.
// Invalid UTF-8 in generated text is replaced (JSON must be UTF-8).
std::string CompletionJson(const Completion& completion, bool chat, bool logprobs);

// Writes lines to `path` through a temporary file renamed into place, so a
// failed job never leaves a half-written output.
absl::Status WriteLinesAtomically(const std::string& path, const std::vector<std::string>& lines);

// The job's --output as each batch finishes: the file is created empty when
// the job starts, and each batch's lines are appended in one write and
// synced before the next batch runs, so Ctrl-C or a later failure keeps
// every finished result (one JSON object a line, in prompt order).
class ResultsFile {
 public:
  static absl::StatusOr<std::unique_ptr<ResultsFile>> Create(const std::string& path);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  absl::Status Append(const std::vector<std::string>& lines);

 private:
  ResultsFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_RESULTS_H_
