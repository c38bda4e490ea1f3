#include "tokenizer/tokenizer_json.h"

#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/tiktoken_model.h"

namespace llama {
namespace {

using nlohmann::json;

// `value[key]`, or null when `value` is not an object or has no such key.
const json& Field(const json& value, const char* key) {
  static const json kNull;
  if (!value.is_object()) return kNull;
  const auto it = value.find(key);
  return it == value.end() ? kNull : *it;
}

std::string TypeOf(const json& value) {
  const json& type = Field(value, "type");
  return type.is_string() ? type.get<std::string>() : value.dump();
}

// Llama 3's pre-tokenizer: Split on the reference's pattern, then ByteLevel
// without its own regex or prefix space (tiktoken's splitting, bytes as
// characters). Anything else would split text otherwise than we do.
absl::Status CheckPreTokenizer(const json& tokenizer, absl::string_view source) {
  const json& pre = Field(tokenizer, "pre_tokenizer");
  const json& steps = Field(pre, "pretokenizers");
  const bool shape = TypeOf(pre) == "Sequence" && steps.is_array() && steps.size() == 2 &&
                     TypeOf(steps[0]) == "Split" && TypeOf(steps[1]) == "ByteLevel";
  if (!shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: pre_tokenizer is %s; expected Llama 3's Sequence of Split and ByteLevel (only Llama 3's byte-level "
        "tokenizer.json is read; for a SentencePiece model such as Llama 2's, pass its tokenizer.model)",
        source, pre.dump().substr(0, 200)));
  }
  const json& pattern = Field(Field(steps[0], "pattern"), "Regex");
  if (pattern != internal_tokenizer::kLlama3Pattern || Field(steps[0], "behavior") != "Isolated" ||
      Field(steps[0], "invert") == true) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: pre_tokenizer.pretokenizers[0] is %s; expected an Isolated Split on Llama 3's pattern %s", source,
        steps[0].dump().substr(0, 300), internal_tokenizer::kLlama3Pattern));
  }
  if (Field(steps[1], "add_prefix_space") == true || Field(steps[1], "use_regex") == true) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: pre_tokenizer.pretokenizers[1] is %s; expected ByteLevel with add_prefix_space and use_regex false",
        source, steps[1].dump()));
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const json& tokenizer, absl::string_view source) {
  const json& model = Field(tokenizer, "model");
  if (TypeOf(model) != "BPE" || Field(model, "byte_fallback") == true) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: model is a %s%s; expected Llama 3's byte-level BPE (for a SentencePiece model such as Llama 2's, pass "
        "its tokenizer.model)",
        source, TypeOf(model).substr(0, 100), Field(model, "byte_fallback") == true ? " with byte_fallback" : ""));
  }
  if (!Field(tokenizer, "normalizer").is_null()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: normalizer is %s; expected null, as Llama 3 has none",
                                                      source, Field(tokenizer, "normalizer").dump().substr(0, 200)));
  }
  return CheckPreTokenizer(tokenizer, source);
}

// The special tokens of added_tokens, by id; their first id is where the
// base tokens end.
absl::Status ReadSpecials(const json& tokenizer, absl::string_view source, ByteLevelVocabulary& vocabulary,
                          int& first_special) {
  std::map<int, std::string> specials;
  const json& added = Field(tokenizer, "added_tokens");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& id = Field(added[i], "id");
    const json& content = Field(added[i], "content");
    if (!id.is_number_integer() || !content.is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: added_tokens[%d] is %s; expected {\"id\": <number>, \"content\": <text>, ...}", source, i,
          added[i].dump().substr(0, 200)));
    }
    if (Field(added[i], "special") != false) specials[id.get<int>()] = content.get<std::string>();
  }
  first_special = specials.empty() ? -1 : specials.begin()->first;
  for (const auto& [id, content] : specials) {
    if (id != first_special + static_cast<int>(vocabulary.specials.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: added_tokens: special token %d (\"%s\") leaves a gap after %d; expected consecutive ids", source, id,
          content, first_special + vocabulary.specials.size() - 1));
    }
    vocabulary.specials.push_back(content);
  }
  return absl::OkStatus();
}

// model.vocab's base tokens (ids below `first_special`, or all), by id.
absl::Status ReadVocab(const json& model, int first_special, absl::string_view source,
                       ByteLevelVocabulary& vocabulary) {
  const json& vocab = Field(model, "vocab");
  if (!vocab.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: model.vocab is missing; expected {token: id}", source));
  }
  const size_t base = first_special >= 0 ? static_cast<size_t>(first_special) : vocab.size();
  vocabulary.tokens.assign(base, "");
  size_t found = 0;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: model.vocab[\"%s\"] is %s; expected a token id", source,
                                                        token, id.dump()));
    }
    const size_t at = id.get<size_t>();
    if (at >= base) continue;  // A special token; added_tokens has it.
    if (!vocabulary.tokens[at].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: model.vocab: id %d is both \"%s\" and \"%s\"", source,
                                                        at, vocabulary.tokens[at], token));
    }
    vocabulary.tokens[at] = token;
    ++found;
  }
  if (found != base) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: model.vocab has %d base tokens; expected ids 0..%d, each once, before the special tokens", source, found,
        base - 1));
  }
  return absl::OkStatus();
}

// model.merges in either form the library writes: "a b" (before 0.20) or [a, b].
absl::Status ReadMerges(const json& model, absl::string_view source, ByteLevelVocabulary& vocabulary) {
  const json& merges = Field(model, "merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      vocabulary.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::vector<std::string> parts =
        merge.is_string() ? absl::StrSplit(merge.get<std::string>(), ' ') : std::vector<std::string>();
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: model.merges[%d] is %s; expected \"<left> <right>\" or [\"<left>\", \"<right>\"]", source, i,
          merge.dump()));
    }
    vocabulary.merges.emplace_back(parts[0], parts[1]);
  }
  return absl::OkStatus();
}

}  // namespace

bool LooksLikeTokenizerJson(absl::string_view contents) {
  const absl::string_view start = absl::StripLeadingAsciiWhitespace(contents);
  return !start.empty() && start.front() == '{';
}

absl::StatusOr<std::string> TiktokenRanksFromTokenizerJson(absl::string_view contents, absl::string_view source) {
  const json tokenizer = json::parse(contents.begin(), contents.end(), nullptr, /*allow_exceptions=*/false);
  if (tokenizer.is_discarded() || !Field(tokenizer, "model").is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer \"%s\" is %s; expected Hugging Face's tokenizer.json (an object with \"model\")", source,
        tokenizer.is_discarded() ? "not valid JSON" : "JSON without a \"model\" object"));
  }
  const std::string where = absl::StrFormat("tokenizer \"%s\"", source);
  RETURN_IF_ERROR(CheckModel(tokenizer, where));
  ByteLevelVocabulary vocabulary;
  vocabulary.tokens_key = "model.vocab";
  vocabulary.merges_key = "model.merges";
  vocabulary.specials_key = "added_tokens";
  int first_special = -1;
  RETURN_IF_ERROR(ReadSpecials(tokenizer, where, vocabulary, first_special));
  RETURN_IF_ERROR(ReadVocab(Field(tokenizer, "model"), first_special, where, vocabulary));
  RETURN_IF_ERROR(ReadMerges(Field(tokenizer, "model"), where, vocabulary));
  return TiktokenRanksFile(vocabulary, where);
}

}  // namespace llama
