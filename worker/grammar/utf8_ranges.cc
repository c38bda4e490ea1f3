#include "worker/grammar/utf8_ranges.h"

#include <algorithm>

namespace llama::grammar {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Splits [lo, hi] until both ends encode to the same length and every byte
// position after the first differing one spans its full 0x80-0xBF range.
void Split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  for (const uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      Split(lo, edge, out);
      Split(edge + 1, hi, out);
      return;
    }
  }
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  char a[4], b[4];
  EncodeUtf8(lo, a);
  EncodeUtf8(hi, b);
  Utf8Sequence sequence;
  for (int i = 0; i < n; ++i) sequence.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> merged;
  for (const CodePointRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodePointRange> complement;
    uint32_t next = 0;
    for (const CodePointRange& r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  std::vector<CodePointRange> out;
  for (CodePointRange r : merged) {
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.lo > r.hi) continue;
    if (r.lo < kSurrogateLo && r.hi > kSurrogateHi) {
      out.push_back({r.lo, kSurrogateLo - 1});
      out.push_back({kSurrogateHi + 1, r.hi});
    } else if (r.lo >= kSurrogateLo && r.hi <= kSurrogateHi) {
      continue;
    } else if (r.lo >= kSurrogateLo && r.lo <= kSurrogateHi) {
      out.push_back({kSurrogateHi + 1, r.hi});
    } else if (r.hi >= kSurrogateLo && r.hi <= kSurrogateHi) {
      out.push_back({r.lo, kSurrogateLo - 1});
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  for (const CodePointRange& r : ranges) Split(r.lo, r.hi, out);
  return out;
}

int EncodeUtf8(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

int DecodeUtf8(absl::string_view text, uint32_t& cp) {
  if (text.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(0);
  int n = 0;
  uint32_t min = 0;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < static_cast<size_t>(n)) return 0;
  for (int i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  if (cp < min || cp > kMaxCodePoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) return 0;
  return n;
}

}  // namespace llama::grammar
