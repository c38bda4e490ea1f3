#include "base/named_values.h"

#include <gtest/gtest.h>

namespace llama {
namespace {

enum class Colour { kRed, kGreen, kBlue };

constexpr NamedValues<Colour, 4> kColours({
    {"red", Colour::kRed},
    {"green", Colour::kGreen},
    {"verde", Colour::kGreen},
    {"blue", Colour::kBlue},
});

TEST(NamedValuesTest, NameIsAValuesFirstEntry) {
  EXPECT_EQ(kColours.Name(Colour::kRed), "red");
  EXPECT_EQ(kColours.Name(Colour::kGreen), "green");
  EXPECT_EQ(kColours.Name(static_cast<Colour>(7)), "unknown");
}

TEST(NamedValuesTest, FindTakesEverySpellingCaseSensitively) {
  EXPECT_EQ(kColours.Find("verde"), Colour::kGreen);
  EXPECT_EQ(kColours.Find("blue"), Colour::kBlue);
  EXPECT_EQ(kColours.Find("Blue"), std::nullopt);
  EXPECT_EQ(kColours.Find(""), std::nullopt);
}

TEST(NamedValuesTest, ErrorsListTheNamesQuoted) {
  EXPECT_EQ(kColours.QuotedNames(), "\"red\", \"green\" or \"blue\"");
  const absl::StatusOr<Colour> colour = kColours.Parse("colour", "mauve");
  EXPECT_EQ(colour.status(),
            absl::InvalidArgumentError("colour \"mauve\": expected \"red\", \"green\" or \"blue\""));
  EXPECT_EQ(kColours.ParseFlag("colour", "mauve").status(),
            absl::InvalidArgumentError("--colour=\"mauve\": expected \"red\", \"green\" or \"blue\""));
  EXPECT_EQ(*kColours.Parse("colour", "verde"), Colour::kGreen);
  EXPECT_EQ(*kColours.ParseFlag("colour", "red"), Colour::kRed);
}

TEST(NamedValuesTest, TwoNamesAreJoinedByOr) {
  constexpr NamedValues<bool, 2> kSwitch({{"on", true}, {"off", false}});
  EXPECT_EQ(kSwitch.QuotedNames(), "\"on\" or \"off\"");
}

}  // namespace
}  // namespace llama
