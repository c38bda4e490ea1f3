#include "tokenizer/token_speller.h"

#include "absl/strings/strip.h"
#include "absl/strings/str_replace.h"

namespace llama {
namespace {

constexpr char kSpaceMarker[] = "\xe2\x96\x81";  // U+2581, SentencePiece's space.

}  // namespace

std::string TokenSpeller::Spell(int id) const {
  if (tokenizer_.family() == Tokenizer::Family::kTiktoken) return std::string(tokenizer_.TokenBytes(id));
  if (const int byte = tokenizer_.ByteValue(id); byte >= 0) return std::string(1, static_cast<char>(byte));
  const Tokenizer::Piece piece = tokenizer_.GetPiece(id);
  if (piece.kind != Tokenizer::PieceKind::kNormal) {
    // Control pieces decode to nothing, the unknown piece to " ⁇ " wherever
    // they stand: as Decode spells them alone.
    absl::StatusOr<std::string> alone = tokenizer_.Decode({id});
    return alone.ok() ? *alone : std::string();
  }
  absl::string_view text = piece.text;
  if (!text_started_) text = absl::StripPrefix(text, kSpaceMarker);
  return absl::StrReplaceAll(text, {{kSpaceMarker, " "}});
}

void TokenSpeller::Append(int id) {
  if (tokenizer_.family() == Tokenizer::Family::kSentencePiece &&
      tokenizer_.GetPiece(id).kind != Tokenizer::PieceKind::kControl) {
    text_started_ = true;
  }
}

}  // namespace llama
