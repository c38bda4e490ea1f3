#include "tokenizer/stream_decoder.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "tokenizer/utf8.h"

namespace llama {
size_t StreamDecoder::PendingByteCount() const {
  // Trailing byte pieces, newest last; an incomplete character is at most 3 bytes.
  std::string bytes;
  for (size_t count = 0; count < 3 && count < ids_.size() - emitted_; ++count) {
    const int value = tokenizer_.ByteValue(ids_[ids_.size() - 1 - count]);
    if (value < 0) break;
    bytes.insert(bytes.begin(), static_cast<char>(value));
  }
  return IncompleteUtf8Tail(bytes);
}

absl::StatusOr<std::string> StreamDecoder::EmitUpTo(size_t end) {
  if (end <= emitted_) return std::string();
  // Decode from the last anchor before the emitted boundary, so the leading
  // whitespace rule and byte grouping see the same context as a full decode.
  size_t start = emitted_;
  while (start > 0 && !tokenizer_.IsTextAnchor(ids_[start - 1])) --start;
  if (start > 0) --start;
  const absl::Span<const int> ids(ids_);
  ASSIGN_OR_RETURN(std::string before, tokenizer_.Decode(ids.subspan(start, emitted_ - start)));
  ASSIGN_OR_RETURN(std::string after, tokenizer_.Decode(ids.subspan(start, end - start)));
  if (after.compare(0, before.size(), before) != 0) {
    return absl::InternalError(absl::StrFormat(
        "stream decoder: decoding ids [%d, %d) changed text already returned", start, end));
  }
  emitted_ = end;
  return after.substr(before.size());
}

void StreamDecoder::Follow(absl::Span<const int> context) {
  ids_.assign(context.begin(), context.end());
  emitted_ = ids_.size();
}

absl::StatusOr<std::string> StreamDecoder::Push(int id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token id %d is outside the vocabulary [0, %d)", id, tokenizer_.vocab_size()));
  }
  if (tokenizer_.family() == Tokenizer::Family::kTiktoken) {
    // Byte-level tokens: hold back only an incomplete last character.
    absl::StrAppend(&pending_bytes_, tokenizer_.TokenBytes(id));
    const size_t ready = pending_bytes_.size() - IncompleteUtf8Tail(pending_bytes_);
    std::string text = SanitizeUtf8(absl::string_view(pending_bytes_).substr(0, ready));
    pending_bytes_.erase(0, ready);
    return text;
  }
  ids_.push_back(id);
  return EmitUpTo(ids_.size() - PendingByteCount());
}

absl::StatusOr<std::string> StreamDecoder::Finish() {
  if (tokenizer_.family() == Tokenizer::Family::kTiktoken) {
    std::string text = SanitizeUtf8(pending_bytes_);
    pending_bytes_.clear();
    return text;
  }
  return EmitUpTo(ids_.size());
}

}  // namespace llama
