#include "tokenizer/gguf_vocabulary.h"

#include <algorithm>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/sentencepiece_proto.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/tokenizer.h"

namespace llama {
namespace {

using Metadata = std::vector<std::pair<std::string, nlohmann::json>>;
using nlohmann::json;

constexpr char kTokens[] = "tokenizer.ggml.tokens";

// One file's metadata, with errors that name the file and the key.
class Keys {
 public:
  Keys(const Metadata& metadata, absl::string_view source) : metadata_(metadata), source_(source) {}

  const json* Find(absl::string_view key) const {
    for (const auto& [name, value] : metadata_) {
      if (name == key) return &value;
    }
    return nullptr;
  }

  absl::Status Error(absl::string_view key, absl::string_view problem, absl::string_view expected) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: metadata key \"%s\" %s; expected %s", source_, key, problem, expected));
  }

  // A value that must be there and pass `valid`.
  template <typename Check>
  absl::StatusOr<const json*> Get(absl::string_view key, absl::string_view expected, Check valid) const {
    const json* value = Find(key);
    if (value == nullptr) return Error(key, "is missing", expected);
    if (!valid(*value)) return Error(key, absl::StrFormat("is %s", value->dump().substr(0, 100)), expected);
    return value;
  }

  absl::StatusOr<std::string> String(absl::string_view key, absl::string_view expected) const {
    ASSIGN_OR_RETURN(const json* value, Get(key, expected, [](const json& v) { return v.is_string(); }));
    return value->get<std::string>();
  }

  absl::StatusOr<int> Id(absl::string_view key, int vocab_size) const {
    const std::string expected = absl::StrFormat("a token id below %d", vocab_size);
    ASSIGN_OR_RETURN(const json* value, Get(key, expected, [vocab_size](const json& v) {
                       return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size;
                     }));
    return value->get<int>();
  }

  // An array of `size` elements that each pass `valid` (any size: -1); the
  // error names the first element that does not.
  template <typename Check>
  absl::StatusOr<const json*> Array(absl::string_view key, int64_t size, absl::string_view element,
                                    Check valid) const {
    const std::string expected = size < 0 ? absl::StrFormat("an array of %s", element)
                                          : absl::StrFormat("an array of %d %s, one per token", size, element);
    ASSIGN_OR_RETURN(const json* value, Get(key, expected, [&](const json& v) {
                       return v.is_array() && (size < 0 || static_cast<int64_t>(v.size()) == size);
                     }));
    const auto bad = std::find_if_not(value->begin(), value->end(), valid);
    if (bad != value->end()) {
      return Error(key, absl::StrFormat("has %s at index %d", bad->dump().substr(0, 100), bad - value->begin()),
                   expected);
    }
    return value;
  }

  bool Flag(absl::string_view key, bool otherwise) const {
    const json* value = Find(key);
    return value != nullptr && value->is_boolean() ? value->get<bool>() : otherwise;
  }

  absl::string_view source() const { return source_; }

 private:
  const Metadata& metadata_;
  absl::string_view source_;
};

bool IsString(const json& v) { return v.is_string(); }

// SentencePiece finds BOS and EOS only among control pieces.
absl::StatusOr<int> ControlId(const Keys& keys, absl::string_view key,
                              const std::vector<SentencePieceSpec::Piece>& pieces) {
  ASSIGN_OR_RETURN(const int id, keys.Id(key, static_cast<int>(pieces.size())));
  if (pieces[id].type != SentencePieceType::kControl) {
    const std::string found =
        absl::StrFormat("is %d, \"%s\" of type %d", id, pieces[id].text, static_cast<int>(pieces[id].type));
    return keys.Error(key, found, "a control token (tokenizer.ggml.token_type 3)");
  }
  return id;
}

// llama.cpp's "llama" tokenizer: SentencePiece's pieces, scores and types.
absl::StatusOr<std::string> SentencePieceFromGguf(const Keys& keys) {
  ASSIGN_OR_RETURN(const json* tokens, keys.Array(kTokens, -1, "strings", IsString));
  const int64_t n = static_cast<int64_t>(tokens->size());
  ASSIGN_OR_RETURN(const json* scores, keys.Array("tokenizer.ggml.scores", n, "numbers",
                                                  [](const json& v) { return v.is_number(); }));
  ASSIGN_OR_RETURN(const json* types, keys.Array("tokenizer.ggml.token_type", n, "token types 1-6", [](const json& v) {
                     return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 6;
                   }));
  SentencePieceSpec spec;
  spec.unk_id = -1;
  for (int64_t id = 0; id < n; ++id) {
    spec.pieces.push_back({(*tokens)[id].get<std::string>(), (*scores)[id].get<float>(),
                           static_cast<SentencePieceType>((*types)[id].get<int>())});
    if (spec.unk_id < 0 && spec.pieces.back().type == SentencePieceType::kUnknown) spec.unk_id = static_cast<int>(id);
  }
  if (keys.Find("tokenizer.ggml.unknown_token_id") != nullptr) {
    ASSIGN_OR_RETURN(spec.unk_id, keys.Id("tokenizer.ggml.unknown_token_id", static_cast<int>(n)));
  }
  if (spec.unk_id < 0 || spec.pieces[spec.unk_id].type != SentencePieceType::kUnknown) {
    return keys.Error("tokenizer.ggml.token_type", "marks no unknown token (type 2) as SentencePiece needs one",
                      "one, or tokenizer.ggml.unknown_token_id naming it");
  }
  ASSIGN_OR_RETURN(spec.bos_id, ControlId(keys, "tokenizer.ggml.bos_token_id", spec.pieces));
  ASSIGN_OR_RETURN(spec.eos_id, ControlId(keys, "tokenizer.ggml.eos_token_id", spec.pieces));
  spec.add_dummy_prefix = keys.Flag("tokenizer.ggml.add_space_prefix", true);
  spec.remove_extra_whitespaces = keys.Flag("tokenizer.ggml.remove_extra_whitespaces", false);
  return SerializeSentencePieceModel(spec);
}

// llama.cpp's "gpt2" tokenizer with its Llama 3 pre-tokenizer.
absl::StatusOr<std::string> TiktokenFromGguf(const Keys& keys) {
  ASSIGN_OR_RETURN(const std::string pre, keys.String("tokenizer.ggml.pre", "\"llama-bpe\" (Llama 3's)"));
  if (pre != "llama-bpe") {
    return keys.Error("tokenizer.ggml.pre", absl::StrFormat("is \"%s\"", pre),
                      "\"llama-bpe\": Llama 3's pre-tokenizer is the only byte-level one we encode with");
  }
  ASSIGN_OR_RETURN(const json* tokens, keys.Array(kTokens, -1, "strings", IsString));
  ASSIGN_OR_RETURN(const json* merges, keys.Array("tokenizer.ggml.merges", -1, "\"<left> <right>\" strings",
                                                  [](const json& v) {
                                                    return v.is_string() &&
                                                           std::count(v.get_ref<const std::string&>().begin(),
                                                                      v.get_ref<const std::string&>().end(), ' ') == 1;
                                                  }));
  const size_t specials = internal_tokenizer::Llama3SpecialTokens().size();
  if (tokens->size() <= specials) {
    return keys.Error(kTokens, absl::StrFormat("has %d tokens", tokens->size()),
                      absl::StrFormat("the base tokens and then Llama 3's %d special tokens", specials));
  }
  ByteLevelVocabulary vocabulary;
  vocabulary.tokens_key = vocabulary.specials_key = kTokens;
  vocabulary.merges_key = "tokenizer.ggml.merges";
  for (size_t id = 0; id < tokens->size(); ++id) {
    std::vector<std::string>& list = id < tokens->size() - specials ? vocabulary.tokens : vocabulary.specials;
    list.push_back((*tokens)[id].get<std::string>());
  }
  for (const json& merge : *merges) {
    const std::pair<std::string, std::string> parts = absl::StrSplit(merge.get<std::string>(), ' ');
    vocabulary.merges.push_back(parts);
  }
  return TiktokenRanksFile(vocabulary, keys.source());
}

// The rebuilt file's BOS and EOS are the ones the metadata names.
absl::Status CheckSpecialIds(const Keys& keys, const Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(const int bos, keys.Id("tokenizer.ggml.bos_token_id", tokenizer.vocab_size()));
  ASSIGN_OR_RETURN(const int eos, keys.Id("tokenizer.ggml.eos_token_id", tokenizer.vocab_size()));
  const std::vector<int>& stops = tokenizer.stop_ids();
  if (bos != tokenizer.bos_id()) {
    return keys.Error("tokenizer.ggml.bos_token_id", absl::StrFormat("is %d", bos),
                      absl::StrFormat("the tokenizer's BOS, %d (a control token of type 3)", tokenizer.bos_id()));
  }
  if (eos != tokenizer.eos_id() && std::find(stops.begin(), stops.end(), eos) == stops.end()) {
    return keys.Error("tokenizer.ggml.eos_token_id", absl::StrFormat("is %d", eos),
                      absl::StrFormat("the tokenizer's EOS, %d (a control token of type 3)%s", tokenizer.eos_id(),
                                      stops.size() > 1 ? " or another of its stop tokens" : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> TokenizerModelFromGguf(const Metadata& metadata, absl::string_view source) {
  const Keys keys(metadata, source);
  constexpr char kExpected[] = "\"llama\" (SentencePiece: Llama 2) or \"gpt2\" (byte-level BPE: Llama 3)";
  ASSIGN_OR_RETURN(const std::string model, keys.String("tokenizer.ggml.model", kExpected));
  std::string serialized;
  if (model == "llama") {
    ASSIGN_OR_RETURN(serialized, SentencePieceFromGguf(keys));
  } else if (model == "gpt2") {
    ASSIGN_OR_RETURN(serialized, TiktokenFromGguf(keys));
  } else {
    return keys.Error("tokenizer.ggml.model", absl::StrFormat("is \"%s\"", model), kExpected);
  }
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer, Tokenizer::FromSerialized(serialized, source));
  RETURN_IF_ERROR(CheckSpecialIds(keys, *tokenizer));
  return serialized;
}

}  // namespace llama
