#include "worker/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace llama {

absl::Status CheckEngineRequest(const EngineRequest& request, int64_t vocab, int64_t max_seq_len) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty: expected at least one token");
  if (static_cast<int64_t>(request.prompt.size()) > max_seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat("prompt has %d tokens, more than the context of %d",
                                                      request.prompt.size(), max_seq_len));
  }
  for (int token : request.prompt) {
    if (token < 0 || token >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("prompt: token id %d outside the vocabulary [0, %d)", token, vocab));
    }
  }
  for (int token : request.stop_ids) {
    if (token < 0 || token >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("stop ids: token id %d outside the vocabulary [0, %d)", token, vocab));
    }
  }
  if (absl::Status s = request.sampling.Validate(vocab); !s.ok()) return s;
  // No more alternatives than there are tokens.
  const int64_t max_top = std::min<int64_t>(kMaxTopLogprobs, vocab);
  if (request.top_logprobs < 0 || request.top_logprobs > max_top) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_logprobs %d: expected 0 to %d", request.top_logprobs, max_top));
  }
  if (request.max_new_tokens.has_value() && *request.max_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_new_tokens %d: expected >= 0", *request.max_new_tokens));
  }
  if (request.min_new_tokens < 0 ||
      (request.max_new_tokens.has_value() && request.min_new_tokens > *request.max_new_tokens)) {
    return absl::InvalidArgumentError(absl::StrFormat("min_new_tokens %d: expected 0 to max_new_tokens (%d)",
                                                      request.min_new_tokens, request.max_new_tokens.value_or(-1)));
  }
  if (request.grammar != nullptr && request.grammar->vocab_size() != vocab) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "grammar: its token masks cover %d tokens; the model's vocabulary has %d (a tokenizer of another model?)",
        request.grammar->vocab_size(), vocab));
  }
  return absl::OkStatus();
}

}  // namespace llama
