#include "tokenizer/stream_decoder.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

using ::llama::testing::FixtureTokenizer;

// True if `text` is well-formed UTF-8 (so it ends on a character boundary).
bool IsWellFormedUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = text[i];
    const int extra = c < 0x80               ? 0
                      : (c & 0xE0) == 0xC0 ? 1
                      : (c & 0xF0) == 0xE0 ? 2
                      : (c & 0xF8) == 0xF0 ? 3
                                           : -1;
    if (extra < 0 || i + extra >= text.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += 1 + extra;
  }
  return true;
}

// Streams `ids` and checks the contract against a one-shot Decode.
void ExpectStreamsLikeDecode(const std::vector<int>& ids) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  StreamDecoder decoder(tokenizer);
  std::string streamed;
  for (int id : ids) {
    absl::StatusOr<std::string> piece = decoder.Push(id);
    ASSERT_TRUE(piece.ok()) << piece.status();
    ASSERT_TRUE(IsWellFormedUtf8(*piece)) << "partial character returned";
    streamed += *piece;
  }
  absl::StatusOr<std::string> rest = decoder.Finish();
  ASSERT_TRUE(rest.ok()) << rest.status();
  streamed += *rest;
  absl::StatusOr<std::string> whole = tokenizer.Decode(ids);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(streamed, *whole) << ::testing::PrintToString(ids);
}

TEST(StreamDecoderTest, GoldenSequences) {
  for (const nlohmann::json& row : testing::ReadGolden("decode_golden.json")) {
    ExpectStreamsLikeDecode(row["ids"].get<std::vector<int>>());
  }
}

TEST(StreamDecoderTest, EncodedTextRoundTrips) {
  for (const nlohmann::json& row : testing::ReadGolden("encode_golden.json")) {
    ExpectStreamsLikeDecode(row["ids"].get<std::vector<int>>());
  }
}

// Random sequences weighted towards what breaks streaming: runs of byte
// pieces (lead bytes, continuation bytes, invalid bytes), BOS/EOS, pieces
// that are only whitespace, and ordinary pieces.
TEST(StreamDecoderTest, RandomSequences) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  std::vector<int> byte_ids(256, -1), other_ids;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.ByteValue(id) >= 0) {
      byte_ids[tokenizer.ByteValue(id)] = id;
    } else {
      other_ids.push_back(id);
    }
  }
  std::mt19937 rng(20261129);
  for (int round = 0; round < 3000; ++round) {
    std::vector<int> ids(std::uniform_int_distribution<int>(0, 30)(rng));
    for (int& id : ids) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      if (kind < 3) {  // A UTF-8 lead byte.
        id = byte_ids[std::uniform_int_distribution<int>(0xC0, 0xF7)(rng)];
      } else if (kind < 6) {  // A continuation byte.
        id = byte_ids[std::uniform_int_distribution<int>(0x80, 0xBF)(rng)];
      } else if (kind < 7) {  // Any byte.
        id = byte_ids[std::uniform_int_distribution<int>(0, 255)(rng)];
      } else {
        id = other_ids[std::uniform_int_distribution<size_t>(0, other_ids.size() - 1)(rng)];
      }
    }
    ExpectStreamsLikeDecode(ids);
    if (HasFatalFailure()) return;
  }
}

TEST(StreamDecoderTest, HoldsBackAnIncompleteCharacterOnly) {
  const Tokenizer& tokenizer = FixtureTokenizer();
  int byte_id[256];
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.ByteValue(id) >= 0) byte_id[tokenizer.ByteValue(id)] = id;
  }
  StreamDecoder decoder(tokenizer);
  // U+1F999 LLAMA is F0 9F A6 99.
  EXPECT_EQ(*decoder.Push(byte_id[0xF0]), "");
  EXPECT_EQ(*decoder.Push(byte_id[0x9F]), "");
  EXPECT_EQ(*decoder.Push(byte_id[0xA6]), "");
  EXPECT_EQ(*decoder.Push(byte_id[0x99]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(*decoder.Finish(), "");
}

TEST(StreamDecoderTest, RejectsIdsOutsideTheVocabulary) {
  StreamDecoder decoder(FixtureTokenizer());
  EXPECT_EQ(decoder.Push(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llama
