// How a job's results leave the worker: text on stdout as the reference's
// example scripts print it, and JSON Lines shaped like the reference's
// return values plus token ids.

#ifndef LLAMA_WORKER_RESULTS_H_
#define LLAMA_WORKER_RESULTS_H_

#include <cstddef>
#include <memory>
#include <set>
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

// A batch job's line of --output for its prompt `index`: {"index": i,
// CompletionJson's fields..., "job": job_key}, or for a prompt that could
// not run {"index": i, "error": "...", "job": job_key}. `job_key` names the
// inputs (ResumeResults).
std::string ResultLine(size_t index, const std::string& job_key, const Completion& completion, bool chat,
                       bool logprobs);

// What an existing --output already holds for the job named `job_key` of
// `total` prompts: its complete answered lines (an error line or a line cut
// short by Ctrl-C is dropped: that prompt runs again) and their indices. No
// file, or an empty one: nothing. A file with lines of another job (other
// prompts, dialogs or sampling flags), or not of a batch job, is refused
// rather than resumed or overwritten.
struct PreviousResults {
  std::vector<std::string> lines;
  std::set<size_t> done;
};
absl::StatusOr<PreviousResults> ResumeResults(const std::string& path, const std::string& job_key, size_t total);

// Writes lines to `path` through a temporary file renamed into place, so a
// failed job never leaves a half-written output.
absl::Status WriteLinesAtomically(const std::string& path, const std::vector<std::string>& lines);

// The job's --output as each batch finishes: the file is created holding
// `kept` (a resumed job's earlier lines, written atomically) when the job
// starts, and each batch's lines are appended in one write and
// synced before the next batch runs, so Ctrl-C or a later failure keeps
// every finished result (one JSON object a line, in prompt order).
class ResultsFile {
 public:
  static absl::StatusOr<std::unique_ptr<ResultsFile>> Create(const std::string& path,
                                                             const std::vector<std::string>& kept = {});
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
