// Llama 3's tokenizer against tiktoken's official WASM bindings (npm
// "tiktoken", run by tests/tiktoken/tiktoken_golden.mjs with the llama3
// reference's pattern, special tokens and input cuts), on a small ranks
// file trained for the tests: token ids of awkward strings, the chat
// format, decoding and streaming.

#include <filesystem>
#include <fstream>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/process.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "worker/prompt_files.h"

namespace llama {
namespace {

using ::llama::testing::NodeToolsDir;
using ::llama::testing::ReadFileOrEmpty;
using ::testing::HasSubstr;

constexpr char kRanks[] = "tests/fixtures/tiktoken_fixture/tokenizer.model";
constexpr char kDialogs[] = "tests/fixtures/dialogs.json";

std::string Repeat(absl::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, s);
  return out;
}

std::vector<std::string> AwkwardTexts() {
  return {
      "",
      " ",
      "   ",
      "\t\t\n\n  \n",
      " \n \n ",
      "Hello world",
      "  Hello  world  ",
      "Hello\r\nworld\r\n\r\n",
      "1234567890 12 345 6.022e23",
      "I'm you're he'S they'LL we'd it's I'VE",
      "it'SOK they'REally don'The x'll'd I'STAY",  // Case-insensitive contractions; letters follow.
      "\xF0\x9F\xA6\x99\xF0\x9F\x99\x82\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE9\xA6\x96\xE9\x83\xBD \xEC\x84\x9C\xEC\x9A\xB8",
      "e\xCC\x81 a\xCC\x88 n\xCC\x83",
      "\xE2\x80\x83" "em" "\xE2\x80\x83" "space" "\xC2\xA0" "nbsp" "\xE3\x80\x80" "ideographic" "\xC2\x85" "nel",
      "\xFF\xFE invalid \xC3\x28 bytes \xE2\x82",
      "\x80",
      "\xC0\xAF overlong \xED\xA0\x80 surrogate \xF4\x90\x80\x80 too high",
      "<|begin_of_text|>hello<|eot_id|>",
      "def f(x):\n    return x**2  # comment\n",
      Repeat("the", 40000),                      // One 120k-letter run: cut at 25,000 (inside a "the").
      Repeat(" ", 60000) + "x",                  // A whitespace run past 25,000.
      Repeat("The quick brown fox. ", 5000),     // 105k characters.
      Repeat("x \xC3\xA9", 140000),              // 420k characters: cut at 400,000.
  };
}

class TiktokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = Tokenizer::Load(kRanks);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = *std::move(loaded);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TiktokenTest, LayoutOfTheReference) {
  EXPECT_EQ(tokenizer_->family(), Tokenizer::Family::kTiktoken);
  EXPECT_EQ(tokenizer_->vocab_size(), 512 + 256);
  EXPECT_EQ(tokenizer_->bos_id(), 512);
  EXPECT_EQ(tokenizer_->eos_id(), 513);
  EXPECT_EQ(tokenizer_->SpecialId("<|start_header_id|>"), 518);
  EXPECT_EQ(tokenizer_->SpecialId("<|eot_id|>"), 521);
  EXPECT_EQ(tokenizer_->SpecialId("<|reserved_special_token_250|>"), 767);
  EXPECT_EQ(tokenizer_->stop_ids(), (std::vector<int>{513, 521}));
  EXPECT_EQ(tokenizer_->pad_id(), -1);
  // Every merged token is the merge of two lower-ranked ones (GGUF's merge list).
  for (int id = 256; id < 512; ++id) {
    absl::StatusOr<std::pair<int, int>> merge = tokenizer_->BpeMerge(id);
    ASSERT_TRUE(merge.ok()) << id << ": " << merge.status();
    EXPECT_LT(std::max(merge->first, merge->second), id);
    EXPECT_EQ(absl::StrCat(tokenizer_->TokenBytes(merge->first), tokenizer_->TokenBytes(merge->second)),
              tokenizer_->TokenBytes(id));
  }
  EXPECT_THAT(tokenizer_->BpeMerge(65).status().message(), HasSubstr("token 65 is not made by a merge"));
  EXPECT_THAT(tokenizer_->BpeMerge(512).status().message(), HasSubstr("token 512 is not made by a merge"));
}

TEST_F(TiktokenTest, IdsEqualTiktokensAndChatEqualsTheReferenceFormat) {
  ASSERT_TRUE(std::filesystem::exists(NodeToolsDir() + "/node_modules/tiktoken"))
      << NodeToolsDir() << " has no tiktoken: third_party/setup.sh installs it";
  const std::vector<std::string> texts = AwkwardTexts();
  nlohmann::json encoded = nlohmann::json::array();
  for (const std::string& text : texts) encoded.push_back(absl::Base64Escape(text));
  const std::string texts_path = std::string(getenv("TEST_TMPDIR")) + "/texts.json";
  std::ofstream(texts_path) << encoded.dump();
  ProcessOptions options;
  options.argv = {"/usr/bin/env", "node", "tests/tiktoken/tiktoken_golden.mjs", NodeToolsDir(), kRanks, texts_path,
                  kDialogs};
  options.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  options.stdout_path = std::string(getenv("TEST_TMPDIR")) + "/golden.json";
  options.stderr_path = std::string(getenv("TEST_TMPDIR")) + "/golden.stderr";
  absl::StatusOr<std::unique_ptr<Process>> node = Process::Spawn(options);
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<ExitStatus> exit = (*node)->Wait(std::chrono::seconds(120));
  ASSERT_TRUE(exit.ok() && exit->success()) << ReadFileOrEmpty(options.stderr_path);
  const nlohmann::json golden = nlohmann::json::parse(ReadFileOrEmpty(options.stdout_path));

  ASSERT_EQ(golden["texts"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<std::vector<int>> ours = tokenizer_->Encode(texts[i], /*bos=*/false, /*eos=*/false);
    ASSERT_TRUE(ours.ok());
    EXPECT_EQ(*ours, golden["texts"][i].get<std::vector<int>>()) << "text " << i << " (" << texts[i].size() << " bytes)";
  }

  absl::StatusOr<std::vector<Dialog>> dialogs = ReadDialogsFile(kDialogs);
  ASSERT_TRUE(dialogs.ok()) << dialogs.status();
  ASSERT_EQ(golden["dialogs"].size(), dialogs->size());
  for (size_t i = 0; i < dialogs->size(); ++i) {
    absl::StatusOr<ChatPrompt> prompt = EncodeDialog(*tokenizer_, (*dialogs)[i]);
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_EQ(prompt->tokens, golden["dialogs"][i].get<std::vector<int>>()) << "dialog " << i;
    EXPECT_FALSE(prompt->unsafe);
  }
}

TEST_F(TiktokenTest, DecodeAndStreamGiveTheTextBack) {
  for (const std::string& text : AwkwardTexts()) {
    if (text.size() > 1000) continue;
    absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(text, false, false);
    ASSERT_TRUE(ids.ok());
    absl::StatusOr<std::string> decoded = tokenizer_->Decode(*ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, SanitizeUtf8(text));
    StreamDecoder stream(*tokenizer_);
    std::string streamed;
    for (int id : *ids) {
      absl::StatusOr<std::string> piece = stream.Push(id);
      ASSERT_TRUE(piece.ok());
      EXPECT_EQ(SanitizeUtf8(*piece), *piece) << "a streamed piece is not valid UTF-8";
      streamed += *piece;
    }
    streamed += *stream.Finish();
    EXPECT_EQ(streamed, *decoded);
  }
  // A character split across byte tokens is held back until complete.
  const std::vector<int> llama = {tokenizer_->Encode("\xF0", false, false)->at(0),
                                  tokenizer_->Encode("\x9F", false, false)->at(0)};
  StreamDecoder stream(*tokenizer_);
  EXPECT_EQ(*stream.Push(llama[0]), "");
  EXPECT_EQ(*stream.Finish(), "\xEF\xBF\xBD");
  // Special tokens decode to their text.
  EXPECT_EQ(*tokenizer_->Decode(std::vector<int>{512, 521}), "<|begin_of_text|><|eot_id|>");
  EXPECT_FALSE(tokenizer_->Decode(std::vector<int>{768}).ok());
}

TEST(TiktokenLoadTest, BrokenRanksFilesAreRefusedNamingTheLine) {
  const std::string dir = getenv("TEST_TMPDIR");
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) {
    absl::StrAppend(&all_bytes, absl::Base64Escape(std::string(1, static_cast<char>(b))), " ", b, "\n");
  }
  const std::pair<std::string, const char*> cases[] = {
      {all_bytes + "QUI= 256\nnot-base64! 257\n", "line 258: expected \"<base64 token> <rank>\""},
      {all_bytes + "QUI= 255\n", "rank 255 is repeated"},
      {all_bytes + "QQ== 256\n", "rank 256 repeats the bytes of rank 65"},
      {"QQ== 0\n", "byte 0x00 has no token"},
  };
  for (const auto& [contents, message] : cases) {
    const std::string path = dir + "/bad.model";
    std::ofstream(path) << contents;
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Load(path);
    ASSERT_FALSE(t.ok()) << message;
    EXPECT_THAT(t.status().message(), HasSubstr(message));
    EXPECT_THAT(t.status().message(), HasSubstr(path));
  }
}

}  // namespace
}  // namespace llama
