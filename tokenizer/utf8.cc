#include "tokenizer/utf8.h"

#include <algorithm>

namespace llama {

std::pair<int32_t, size_t> DecodeUtf8(absl::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  size_t length;
  int32_t cp;
  uint8_t low = 0x80, high = 0xBF;  // The second byte's range.
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;   // No overlongs.
    if (lead == 0xED) high = 0x9F;  // No surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07;
    if (lead == 0xF0) low = 0x90;   // No overlongs.
    if (lead == 0xF4) high = 0x8F;  // Nothing above U+10FFFF.
  } else {
    return {-1, 1};
  }
  for (size_t i = 1; i < length; ++i) {
    if (at + i >= text.size()) return {-1, i};
    const uint8_t b = byte(at + i);
    if (b < (i == 1 ? low : 0x80) || b > (i == 1 ? high : 0xBF)) return {-1, i};
    cp = cp << 6 | (b & 0x3F);
  }
  return {cp, length};
}

bool IsPythonWhitespace(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto [cp, length] = DecodeUtf8(text, at);
    if (cp < 0) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(text.data() + at, length);
    }
    at += length;
  }
  return out;
}

size_t IncompleteUtf8Tail(absl::string_view bytes) {
  for (size_t k = std::min<size_t>(3, bytes.size()); k >= 1; --k) {
    const size_t at = bytes.size() - k;
    // Incomplete exactly when decoding runs out of input after consuming all k bytes.
    const auto [cp, length] = DecodeUtf8(bytes, at);
    if (cp < 0 && length == k && static_cast<uint8_t>(bytes[at]) >= 0xC2) return k;
  }
  return 0;
}

}  // namespace llama
