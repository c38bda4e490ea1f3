#include "tokenizer/tokenizer_location.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace llama {
namespace {

namespace fs = std::filesystem;

TEST(TokenizerLocationTest, PrefersMetasFileThenTakesTokenizerJson) {
  const fs::path root = fs::path(std::getenv("TEST_TMPDIR")) / "models";
  const fs::path ckpt = root / "llama-3";
  fs::create_directories(ckpt / "original");
  const auto touch = [](const fs::path& p) { std::ofstream(p) << "x"; };
  EXPECT_THAT(std::string(FindTokenizerFile(ckpt.string()).status().message()),
              ::testing::HasSubstr("no tokenizer.model in or next to " + ckpt.string() +
                                   " and no tokenizer.json in it; pass --tokenizer_path"));
  touch(ckpt / "tokenizer.json");
  EXPECT_EQ(*FindTokenizerFile(ckpt.string()), (ckpt / "tokenizer.json").string());
  touch(ckpt / "original" / "tokenizer.model");
  EXPECT_EQ(*FindTokenizerFile(ckpt.string()), (ckpt / "original" / "tokenizer.model").string());
  touch(root / "tokenizer.model");
  EXPECT_EQ(*FindTokenizerFile(ckpt.string()), (root / "tokenizer.model").string());
  touch(ckpt / "tokenizer.model");
  EXPECT_EQ(*FindTokenizerFile(ckpt.string()), (ckpt / "tokenizer.model").string());
}

}  // namespace
}  // namespace llama
