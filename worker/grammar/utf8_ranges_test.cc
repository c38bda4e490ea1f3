#include "worker/grammar/utf8_ranges.h"

#include <string>

#include <gtest/gtest.h>

namespace llama::grammar {
namespace {

// The byte string of `cp` is matched by exactly one sequence.
int Matches(const std::vector<Utf8Sequence>& sequences, uint32_t cp) {
  char bytes[4];
  const int n = EncodeUtf8(cp, bytes);
  int matches = 0;
  for (const Utf8Sequence& s : sequences) {
    if (static_cast<int>(s.size()) != n) continue;
    bool all = true;
    for (int i = 0; i < n; ++i) {
      const uint8_t b = static_cast<uint8_t>(bytes[i]);
      all &= b >= s[i].first && b <= s[i].second;
    }
    matches += all;
  }
  return matches;
}

TEST(Utf8RangesTest, EveryCodePointOfARangeIsMatchedOnceAndNoOtherIs) {
  const std::vector<CodePointRange> ranges = NormalizeRanges({{0x41, 0x5A}, {0x3B1, 0x3C9}, {0x7FF, 0x10400}}, false);
  const std::vector<Utf8Sequence> sequences = Utf8Sequences(ranges);
  for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const bool inside = (cp >= 0x41 && cp <= 0x5A) || (cp >= 0x3B1 && cp <= 0x3C9) || (cp >= 0x7FF && cp <= 0x10400);
    ASSERT_EQ(Matches(sequences, cp), inside ? 1 : 0) << std::hex << cp;
  }
}

TEST(Utf8RangesTest, NegationComplementsAndDropsSurrogates) {
  const std::vector<CodePointRange> ranges = NormalizeRanges({{'"', '"'}, {'\\', '\\'}}, true);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], (CodePointRange{0, '"' - 1}));
  EXPECT_EQ(ranges[1], (CodePointRange{'"' + 1, '\\' - 1}));
  EXPECT_EQ(ranges[2], (CodePointRange{'\\' + 1, 0xD7FF}));
  EXPECT_EQ(ranges[3], (CodePointRange{0xE000, kMaxCodePoint}));
}

TEST(Utf8RangesTest, DecodeRefusesOverlongSurrogatesAndTruncation) {
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("\xC3\xA9", cp), 2);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x98\x80", cp), 4);
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(DecodeUtf8("\xC0\x80", cp), 0);          // Overlong NUL.
  EXPECT_EQ(DecodeUtf8("\xED\xA0\x80", cp), 0);      // U+D800.
  EXPECT_EQ(DecodeUtf8("\xE2\x82", cp), 0);          // Truncated.
  EXPECT_EQ(DecodeUtf8("\xF4\x90\x80\x80", cp), 0);  // Above U+10FFFF.
}

}  // namespace
}  // namespace llama::grammar
