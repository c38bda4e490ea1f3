#include "worker/engine/ngram_lookup.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llama {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Lookup(const std::vector<int>& tokens, int max_tokens) {
  std::vector<int> out = {99};  // Replaced, not appended to.
  NgramLookup(tokens, max_tokens, out);
  return out;
}

TEST(NgramLookupTest, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  // "5 6" occurs twice before the end; the later one was followed by 9.
  EXPECT_THAT(Lookup({5, 6, 7, 8, 5, 6, 9, 1, 2, 5, 6}, 3), ElementsAre(9, 1, 2));
  // A longer suffix wins over a later, shorter match: "4 5 6" was followed by 8.
  EXPECT_THAT(Lookup({4, 5, 6, 8, 3, 5, 6, 7, 4, 5, 6}, 2), ElementsAre(8, 3));
}

TEST(NgramLookupTest, ALoopIsProposedPastTheEndOfTheText) {
  EXPECT_THAT(Lookup({1, 2, 3, 1, 2, 3}, 7), ElementsAre(1, 2, 3, 1, 2, 3, 1));
  EXPECT_THAT(Lookup({8, 8, 8}, 4), ElementsAre(8, 8, 8, 8));
}

TEST(NgramLookupTest, NothingWithoutAMatchOfTheShortestLength) {
  EXPECT_THAT(Lookup({1, 2, 3, 4, 5}, 4), IsEmpty());
  // A single repeated token is enough (kNgramLookupMin is 1).
  EXPECT_THAT(Lookup({7, 1, 2, 7}, 4), ElementsAre(1, 2, 7, 1));
  EXPECT_THAT(Lookup({}, 4), IsEmpty());
  EXPECT_THAT(Lookup({3}, 4), IsEmpty());
  EXPECT_THAT(Lookup({1, 2, 1, 2}, 0), IsEmpty());
}

TEST(NgramLookupTest, MatchesTheLongestSuffixThatOccurred) {
  // Only the last two tokens ("2 3") occurred before; at most kNgramLookupMax are tried.
  static_assert(kNgramLookupMax == 4 && kNgramLookupMin == 1);
  EXPECT_THAT(Lookup({2, 3, 9, 0, 1, 2, 3}, 1), ElementsAre(9));
  EXPECT_THAT(Lookup({1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 2), ElementsAre(0, 1));
}

}  // namespace
}  // namespace llama
