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
#include "worker/job_identity.h"

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
// CompletionJson's fields..., "job": {job's fields}}, or for a prompt that
// could not run {"index": i, "error": "...", "job": {...}}.
std::string ResultLine(size_t index, const JobIdentity& job, const Completion& completion, bool chat, bool logprobs);

// What an existing --output already holds for `job` of `total` prompts: its
// complete answered lines (an error line or a line cut short by Ctrl-C is
// dropped: that prompt runs again) and their indices. No file, or an empty
// one: nothing. A file with a line of another job (the first differing
// input named), or not of a batch job, is refused (FailedPrecondition)
// rather than resumed or overwritten.
struct PreviousResults {
  std::vector<std::string> lines;
  std::set<size_t> done;
};
absl::StatusOr<PreviousResults> ResumeResults(const std::string& path, const JobIdentity& job, size_t total);

// Writes lines to `path` through a temporary file renamed into place, so a
// failed job never leaves a half-written output.
absl::Status WriteLinesAtomically(const std::string& path, const std::vector<std::string>& lines);

// The job's --output as each batch finishes, each batch's lines appended in
// one write and synced before the next batch runs, so Ctrl-C or a later
// failure keeps every finished result (one JSON object a line). A resumed
// job's file starts again from `kept` (its earlier lines, written
// atomically). A fresh one is written beside `path` (path + ".partial") and
// renamed over it with the first batch, so a file there already (an earlier
// job's, with --overwrite_output) stays whole until the new job has an
// answer; a job that ends before its first removes what it began.
class ResultsFile {
 public:
  static absl::StatusOr<std::unique_ptr<ResultsFile>> Create(const std::string& path,
                                                             const std::vector<std::string>& kept = {});
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  absl::Status Append(const std::vector<std::string>& lines);

 private:
  ResultsFile(std::string path, std::string partial, int fd)
      : path_(std::move(path)), partial_(std::move(partial)), fd_(fd) {}
  std::string path_;
  std::string partial_;  // Until the first Append renames it to path_; empty after, or when resumed.
  int fd_;
};

}  // namespace llama

#endif  // LLAMA_WORKER_RESULTS_H_
