#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/utf8.h"

namespace llama {
namespace {

// The code point GPT-2 writes each byte as.
const std::array<int, 256>& CodePoints() {
  static const std::array<int, 256> kMap = [] {
    std::array<int, 256> map{};
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      map[b] = printable ? b : next++;
    }
    return map;
  }();
  return kMap;
}

// The byte each of those code points stands for (-1: none); they are all below 512.
const std::array<int, 512>& Bytes() {
  static const std::array<int, 512> kInverse = [] {
    std::array<int, 512> inverse;
    inverse.fill(-1);
    for (int b = 0; b < 256; ++b) inverse[CodePoints()[b]] = b;
    return inverse;
  }();
  return kInverse;
}

absl::Status CheckSpecials(const ByteLevelVocabulary& vocabulary, absl::string_view source) {
  const std::vector<std::string>& expected = internal_tokenizer::Llama3SpecialTokens();
  const size_t base = vocabulary.tokens.size();
  if (vocabulary.specials.size() != expected.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s has %d special tokens after the %d base tokens; expected Llama 3's %d", source,
        vocabulary.specials_key, vocabulary.specials.size(), base, expected.size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string& found = vocabulary.specials[i];
    // Later Llama 3 releases name some reserved tokens; those ids mean nothing to us.
    const bool renamed_reserved = absl::StartsWith(expected[i], "<|reserved_special_token_") &&
                                  absl::StartsWith(found, "<|") && absl::EndsWith(found, "|>");
    if (found != expected[i] && !renamed_reserved) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %s: token %d is \"%s\"; expected \"%s\" (Llama 3's special tokens follow the base tokens in this "
          "order)",
          source, vocabulary.specials_key, base + i, absl::CHexEscape(found), expected[i]));
    }
  }
  return absl::OkStatus();
}

// See TiktokenRanksFile: each merge's parts and result are tokens, and the
// results' ranks never go down the list.
absl::Status CheckMerges(const ByteLevelVocabulary& vocabulary, const absl::flat_hash_map<std::string, int>& ids,
                         absl::string_view source) {
  int previous = -1;
  for (size_t m = 0; m < vocabulary.merges.size(); ++m) {
    const auto& [left, right] = vocabulary.merges[m];
    for (const std::string& part : {left, right, left + right}) {
      if (!ids.contains(part)) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: %s[%d] (\"%s\" + \"%s\"): \"%s\" is not in %s", source,
                                                          vocabulary.merges_key, m, absl::CHexEscape(left),
                                                          absl::CHexEscape(right), absl::CHexEscape(part),
                                                          vocabulary.tokens_key));
      }
    }
    const int made = ids.at(left + right);
    if (made < previous) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %s[%d] makes token %d after an earlier merge made token %d; expected merges in the order of the ids "
          "they make (tiktoken merges by rank, and the ids are the ranks)",
          source, vocabulary.merges_key, m, made, previous));
    }
    previous = made;
  }
  return absl::OkStatus();
}

}  // namespace

std::string ByteLevelText(absl::string_view bytes) {
  std::string text;
  for (unsigned char b : bytes) {
    const int cp = CodePoints()[b];
    if (cp < 0x80) {
      text += static_cast<char>(cp);
    } else {
      text += static_cast<char>(0xC0 | cp >> 6);
      text += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return text;
}

absl::StatusOr<std::string> ByteLevelBytes(absl::string_view text, absl::string_view where) {
  std::string bytes;
  for (size_t at = 0; at < text.size();) {
    const auto [cp, length] = DecodeUtf8(text, at);
    const int byte = cp >= 0 && cp < static_cast<int>(Bytes().size()) ? Bytes()[cp] : -1;
    if (byte < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: \"%s\" has %s at byte %d, which is not one of GPT-2's 256 byte-level characters", where,
          absl::CHexEscape(text), cp < 0 ? "invalid UTF-8" : absl::StrFormat("U+%04X", cp), at));
    }
    bytes += static_cast<char>(byte);
    at += length;
  }
  return bytes;
}

absl::StatusOr<std::string> TiktokenRanksFile(const ByteLevelVocabulary& vocabulary, absl::string_view source) {
  RETURN_IF_ERROR(CheckSpecials(vocabulary, source));
  absl::flat_hash_map<std::string, int> ids;
  std::string ranks;
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const std::string& token = vocabulary.tokens[id];
    ASSIGN_OR_RETURN(const std::string bytes,
                     ByteLevelBytes(token, absl::StrFormat("%s: %s[%d]", source, vocabulary.tokens_key, id)));
    if (bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s[%d] is empty; expected a token's bytes", source, vocabulary.tokens_key, id));
    }
    if (const auto [it, added] = ids.emplace(token, static_cast<int>(id)); !added) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %s[%d] \"%s\" repeats token %d; expected each once",
                                                        source, vocabulary.tokens_key, id, absl::CHexEscape(token),
                                                        it->second));
    }
    absl::StrAppend(&ranks, absl::Base64Escape(bytes), " ", id, "\n");
  }
  RETURN_IF_ERROR(CheckMerges(vocabulary, ids, source));
  return ranks;
}

}  // namespace llama
