// The text of one streamed completion: generated ids decoded as they come
// (never splitting a UTF-8 character: tokenizer/stream_decoder.h) and cut
// at the first stop string, which never reaches the client, not even its
// first half: text that could still be the start of a stop string is held
// back until it cannot be (users of vLLM and TGI see stop strings leak when
// they span tokens).

#ifndef LLAMA_WORKER_SERVE_TEXT_OUTPUT_H_
#define LLAMA_WORKER_SERVE_TEXT_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace llama {

// Not thread-safe: one per choice. `tokenizer` must outlive it.
class TextOutput {
 public:
  // `context`: the ids the answer continues, decoded as its context
  // (StreamDecoder::Follow), never returned; stop strings look at the
  // answer only.
  TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stops, absl::Span<const int> context = {})
      : decoder_(tokenizer), stops_(std::move(stops)) {
    decoder_.Follow(context);
  }

  // Appends a generated id; returns the text now safe to send (maybe
  // empty). Once a stop string appears, returns the text before it and
  // stopped() turns true: later ids add nothing.
  absl::StatusOr<std::string> Push(int id);
  // At the end of the generation: the text still held back.
  absl::StatusOr<std::string> Finish();

  bool stopped() const { return stopped_; }

 private:
  // Moves what is certain from pending_ to the returned string.
  std::string Release(bool at_end);

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;  // Decoded, not yet returned.
  bool stopped_ = false;
};

}  // namespace llama

#endif  // LLAMA_WORKER_SERVE_TEXT_OUTPUT_H_
