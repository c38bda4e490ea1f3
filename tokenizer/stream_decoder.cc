#include "tokenizer/stream_decoder.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace llama {
namespace {

// Length of the UTF-8 sequence `lead` starts, or 0 if it cannot start one
// (continuation bytes, C0/C1 overlong leads, F5..FF).
int SequenceLength(int lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `second` may follow `lead` in well-formed UTF-8 (Unicode table 3-7:
// excludes overlongs, surrogates and code points above U+10FFFF).
bool ValidSecondByte(int lead, int second) {
  if (lead == 0xE0) return second >= 0xA0 && second <= 0xBF;
  if (lead == 0xED) return second >= 0x80 && second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90 && second <= 0xBF;
  if (lead == 0xF4) return second >= 0x80 && second <= 0x8F;
  return second >= 0x80 && second <= 0xBF;
}

}  // namespace

size_t StreamDecoder::PendingByteCount() const {
  // Trailing bytes, newest last; a UTF-8 sequence is at most 4 bytes, so an
  // incomplete one is at most 3.
  int bytes[3];
  size_t count = 0;
  while (count < 3 && count < ids_.size() - emitted_) {
    const int value = tokenizer_.ByteValue(ids_[ids_.size() - 1 - count]);
    if (value < 0) break;
    bytes[2 - count] = value;
    ++count;
  }
  // Try each suffix of the trailing bytes as "lead + continuations".
  for (size_t k = count; k >= 1; --k) {
    const int* tail = bytes + (3 - k);
    const int length = SequenceLength(tail[0]);
    if (length == 0 || static_cast<size_t>(length) <= k) continue;
    bool valid = true;
    for (size_t i = 1; i < k && valid; ++i) {
      valid = i == 1 ? ValidSecondByte(tail[0], tail[1]) : (tail[i] >= 0x80 && tail[i] <= 0xBF);
    }
    if (valid) return k;
  }
  return 0;
}

absl::StatusOr<std::string> StreamDecoder::EmitUpTo(size_t end) {
  if (end <= emitted_) return std::string();
  // Decode from the last anchor before the emitted boundary, so the leading
  // whitespace rule and byte grouping see the same context as a full decode.
  size_t start = emitted_;
  while (start > 0 && !tokenizer_.IsTextAnchor(ids_[start - 1])) --start;
  if (start > 0) --start;
  const absl::Span<const int> ids(ids_);
  absl::StatusOr<std::string> before = tokenizer_.Decode(ids.subspan(start, emitted_ - start));
  if (!before.ok()) return before.status();
  absl::StatusOr<std::string> after = tokenizer_.Decode(ids.subspan(start, end - start));
  if (!after.ok()) return after.status();
  if (after->compare(0, before->size(), *before) != 0) {
    return absl::InternalError(absl::StrFormat(
        "stream decoder: decoding ids [%d, %d) changed text already returned", start, end));
  }
  emitted_ = end;
  return after->substr(before->size());
}

absl::StatusOr<std::string> StreamDecoder::Push(int id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token id %d is outside the vocabulary [0, %d)", id, tokenizer_.vocab_size()));
  }
  ids_.push_back(id);
  return EmitUpTo(ids_.size() - PendingByteCount());
}

absl::StatusOr<std::string> StreamDecoder::Finish() { return EmitUpTo(ids_.size()); }

}  // namespace llama
