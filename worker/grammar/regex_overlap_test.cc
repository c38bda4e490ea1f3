#include "worker/grammar/regex_overlap.h"

#include <gtest/gtest.h>

namespace llama::grammar::internal_grammar {
namespace {

bool Meet(const char* whole, const char* search) {
  absl::StatusOr<bool> meet = WholeMatchMeetsSearch(whole, search);
  EXPECT_TRUE(meet.ok()) << whole << " / " << search << ": " << meet.status();
  return meet.value_or(true);
}

TEST(RegexOverlapTest, PatternsOfRealOneOfBranchesAreApart) {
  // expo's runtimeVersion: no ':' after the first character of the first.
  const char* version = "^[a-zA-Z\\d][a-zA-Z\\d._+()-]{0,254}$";
  const char* sdk = "^exposdk:((\\d+\\.\\d+\\.\\d+)|(UNVERSIONED))$";
  EXPECT_FALSE(Meet(version, sdk));
  EXPECT_FALSE(Meet(sdk, version));
  // An identifier, or one with ${...} in it.
  const char* name = "^[a-zA-Z_][a-zA-Z0-9_]*$";
  const char* substituted = "^([a-zA-Z_][a-zA-Z0-9_]*)?\\$\\{[a-zA-Z_][a-zA-Z0-9_]*\\}[a-zA-Z0-9_]*$";
  EXPECT_FALSE(Meet(name, substituted));
  EXPECT_FALSE(Meet(substituted, name));
  EXPECT_FALSE(Meet("^pip; ?args:", "^build; ?args:"));
  EXPECT_FALSE(Meet("^((CAN)([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))$", "^((LIN)([1-9]|[1-9][0-9]))$"));
}

TEST(RegexOverlapTest, SearchFindsAMatchAnywhereUnlessAnchored) {
  EXPECT_TRUE(Meet("abc", "b"));
  EXPECT_FALSE(Meet("abc", "^b"));
  EXPECT_TRUE(Meet("abc", "^ab"));
  EXPECT_FALSE(Meet("abc", "ab$"));
  EXPECT_TRUE(Meet("[a-z]+", "^x|y$"));  // Each branch anchored on one side only.
  EXPECT_TRUE(Meet("a+", "^a{3}$"));
  EXPECT_FALSE(Meet("a{1,2}", "^a{3}$"));
  // Python's re, which python-jsonschema uses, lets $ match before a final newline.
  EXPECT_TRUE(Meet("a\\n", "^a$"));
  EXPECT_FALSE(Meet("a\\n\\n", "^a$"));
}

TEST(RegexOverlapTest, WhatCannotBeToldIsAnError) {
  EXPECT_FALSE(WholeMatchMeetsSearch("(?=a)a", "a").ok());
  EXPECT_FALSE(WholeMatchMeetsSearch("a", "(a)\\1").ok());
}

}  // namespace
}  // namespace llama::grammar::internal_grammar
