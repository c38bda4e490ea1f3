#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace llama {
namespace {

using internal_tokenizer::SentencePieceModel;
using internal_tokenizer::TiktokenModel;

// SentencePiece's whitespace marker, U+2581 LOWER ONE EIGHTH BLOCK.
constexpr absl::string_view kSpaceMarker = "\xE2\x96\x81";

// "<0x41>" -> 0x41; anything else -> -1.
int ParseBytePiece(absl::string_view piece) {
  int value = 0;
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>' ||
      !absl::SimpleHexAtoi(piece.substr(3, 2), &value)) {
    return -1;
  }
  return value;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<SentencePieceModel> model)
    : model_(std::move(model)),
      vocab_size_(model_->piece_size()),
      bos_id_(model_->bos_id()),
      eos_id_(model_->eos_id()),
      pad_id_(model_->pad_id()),
      byte_value_(vocab_size_, -1),
      text_anchor_(vocab_size_, 0) {
  for (int id = 0; id < vocab_size_; ++id) {
    const std::string piece = model_->IdToPiece(id);
    if (model_->IsByte(id)) {
      byte_value_[id] = static_cast<int16_t>(ParseBytePiece(piece));
      continue;
    }
    const bool ordinary = !model_->IsControl(id) && !model_->IsUnknown(id) && !model_->IsUnused(id);
    text_anchor_[id] = ordinary && !absl::StrReplaceAll(piece, {{kSpaceMarker, ""}}).empty();
  }
  stop_ids_ = {eos_id_};
}

Tokenizer::Tokenizer(std::unique_ptr<TiktokenModel> model)
    : tiktoken_(std::move(model)),
      vocab_size_(tiktoken_->vocab_size()),
      bos_id_(tiktoken_->SpecialId("<|begin_of_text|>")),
      eos_id_(tiktoken_->SpecialId("<|end_of_text|>")),
      pad_id_(-1),
      byte_value_(vocab_size_, -1),
      text_anchor_(vocab_size_, 0) {
  // The llama3 reference's stop tokens.
  stop_ids_ = {eos_id_, tiktoken_->SpecialId("<|eot_id|>")};
}

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return absl::NotFoundError(
        absl::StrFormat("tokenizer model \"%s\": no such file (--tokenizer_path)", path));
  }
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer model \"%s\" is a directory; expected the tokenizer.model (or tokenizer.json) file", path));
  }
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  if (!file.good() && !file.eof()) {
    return absl::UnavailableError(absl::StrFormat("tokenizer model \"%s\": read failed", path));
  }
  return FromSerialized(contents.str(), path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSerialized(absl::string_view serialized,
                                                                     absl::string_view source) {
  if (serialized.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer model \"%s\" is empty (0 bytes); expected a SentencePiece model", source));
  }
  if (LooksLikeTokenizerJson(serialized)) {
    ASSIGN_OR_RETURN(const std::string ranks, TiktokenRanksFromTokenizerJson(serialized, source));
    return FromSerialized(ranks, source);
  }
  if (TiktokenModel::LooksLikeRanksFile(serialized)) {
    ASSIGN_OR_RETURN(std::unique_ptr<TiktokenModel> model, TiktokenModel::Parse(serialized, source));
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(model)));
  }
  std::string error;
  std::unique_ptr<SentencePieceModel> model =
      SentencePieceModel::FromSerialized(std::string_view(serialized.data(), serialized.size()),
                                         &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer model \"%s\" is neither a SentencePiece model (%s) nor a tiktoken ranks file", source, error));
  }
  if (model->bos_id() < 0 || model->eos_id() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer model \"%s\" defines no BOS or EOS piece (bos_id=%d, eos_id=%d); Llama 2 "
        "needs both",
        source, model->bos_id(), model->eos_id()));
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(model)));
}

Tokenizer::Piece Tokenizer::GetPiece(int id) const {
  if (tiktoken_ != nullptr) {
    // Raw bytes; the rank is the merge priority, as a score it is negated.
    return {std::string(tiktoken_->TokenBytes(id)), -static_cast<float>(id),
            tiktoken_->IsSpecial(id) ? PieceKind::kControl : PieceKind::kNormal};
  }
  PieceKind kind = PieceKind::kNormal;
  if (model_->IsUnknown(id)) {
    kind = PieceKind::kUnknown;
  } else if (model_->IsControl(id)) {
    kind = PieceKind::kControl;
  } else if (model_->IsByte(id)) {
    kind = PieceKind::kByte;
  } else if (model_->IsUnused(id)) {
    kind = PieceKind::kUnused;
  }
  return {model_->IdToPiece(id), model_->Score(id), kind};
}

int Tokenizer::unk_id() const { return tiktoken_ != nullptr ? -1 : model_->unk_id(); }

int Tokenizer::SpecialId(absl::string_view name) const {
  return tiktoken_ != nullptr ? tiktoken_->SpecialId(name) : -1;
}

absl::StatusOr<std::pair<int, int>> Tokenizer::BpeMerge(int id) const {
  if (tiktoken_ == nullptr) return absl::FailedPreconditionError("SentencePiece models have no BPE merge list");
  return tiktoken_->MergeOf(id);
}

absl::string_view Tokenizer::TokenBytes(int id) const {
  return tiktoken_ != nullptr ? tiktoken_->TokenBytes(id) : absl::string_view();
}

absl::StatusOr<std::vector<int>> Tokenizer::Encode(absl::string_view text, bool bos,
                                                   bool eos) const {
  std::vector<int> pieces;
  if (tiktoken_ != nullptr) {
    pieces = tiktoken_->Encode(text);
  } else if (std::string error; !model_->Encode(std::string_view(text.data(), text.size()), &pieces, &error)) {
    return absl::InternalError(absl::StrFormat("SentencePiece encode failed: %s", error));
  }
  std::vector<int> ids;
  ids.reserve(pieces.size() + 2);
  if (bos) ids.push_back(bos_id_);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (eos) ids.push_back(eos_id_);
  return ids;
}

absl::Status Tokenizer::CheckIds(absl::Span<const int> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token id %d at position %d is outside the vocabulary [0, %d)%s", ids[i], i,
          vocab_size_, ids[i] == pad_id_ ? " (it is the pad id, which is not a token)" : ""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int> ids) const {
  RETURN_IF_ERROR(CheckIds(ids));
  std::string text;
  if (tiktoken_ != nullptr) {
    // The reference decodes bytes with errors="replace".
    for (int id : ids) absl::StrAppend(&text, tiktoken_->TokenBytes(id));
    return SanitizeUtf8(text);
  }
  std::string error;
  if (!model_->Decode(std::vector<int>(ids.begin(), ids.end()), &text, &error)) {
    return absl::InternalError(absl::StrFormat("SentencePiece decode failed: %s", error));
  }
  return text;
}

absl::Status CheckSameVocabulary(const Tokenizer& a, const Tokenizer& b) {
  const auto family = [](const Tokenizer& t) {
    return t.family() == Tokenizer::Family::kTiktoken ? "Llama 3's byte-level BPE" : "SentencePiece";
  };
  if (a.family() != b.family()) {
    return absl::FailedPreconditionError(absl::StrFormat("one tokenizer is %s, the other %s", family(a), family(b)));
  }
  if (a.vocab_size() != b.vocab_size()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the vocabularies have %d and %d tokens", a.vocab_size(), b.vocab_size()));
  }
  if (a.bos_id() != b.bos_id() || a.eos_id() != b.eos_id()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("BOS and EOS are tokens %d and %d in one, %d and %d in the other", a.bos_id(), a.eos_id(),
                        b.bos_id(), b.eos_id()));
  }
  const bool scored = a.family() == Tokenizer::Family::kSentencePiece;
  for (int id = 0; id < a.vocab_size(); ++id) {
    const Tokenizer::Piece x = a.GetPiece(id), y = b.GetPiece(id);
    if (x.text != y.text || x.kind != y.kind || (scored && x.score != y.score)) {
      return absl::FailedPreconditionError(absl::StrFormat("token %d is \"%s\" in one and \"%s\" in the other", id,
                                                           absl::CHexEscape(x.text), absl::CHexEscape(y.text)));
    }
  }
  return absl::OkStatus();
}

}  // namespace llama
