#include "tokenizer/sentencepiece_proto.h"

#include <cstdint>
#include <cstring>

namespace llama {
namespace {

// Field numbers of sentencepiece_model.proto.
constexpr int kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr int kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr int kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerByteFallback = 35, kTrainerUnkId = 40,
              kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43, kTrainerUnkPiece = 45,
              kTrainerBosPiece = 46, kTrainerEosPiece = 47, kTrainerPadPiece = 48;
constexpr int kNormalizerName = 1, kNormalizerAddDummyPrefix = 3, kNormalizerRemoveExtraWhitespaces = 4,
              kNormalizerEscapeWhitespaces = 5;
constexpr int kModelTypeBpe = 2;

enum WireType { kVarint = 0, kLengthDelimited = 2, kFixed32 = 5 };

class Message {
 public:
  // Negative int32 values are sign-extended to ten bytes, as protobuf does.
  void Varint(int field, int64_t value) {
    Tag(field, kVarint);
    RawVarint(static_cast<uint64_t>(value));
  }
  void Bytes(int field, const std::string& value) {
    Tag(field, kLengthDelimited);
    RawVarint(value.size());
    bytes_ += value;
  }
  void Float(int field, float value) {
    Tag(field, kFixed32);
    char little_endian[4];
    std::memcpy(little_endian, &value, 4);  // x86-64 and every target here are little-endian.
    bytes_.append(little_endian, 4);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void Tag(int field, WireType type) { RawVarint(static_cast<uint64_t>(field) << 3 | type); }
  void RawVarint(uint64_t value) {
    for (; value >= 0x80; value >>= 7) bytes_ += static_cast<char>(value | 0x80);
    bytes_ += static_cast<char>(value);
  }
  std::string bytes_;
};

// The piece SentencePiece should find for a special id (its default name if none).
std::string PieceText(const SentencePieceSpec& spec, int id, const char* fallback) {
  return id >= 0 ? spec.pieces[id].text : fallback;
}

std::string TrainerSpec(const SentencePieceSpec& spec) {
  Message trainer;
  trainer.Varint(kTrainerModelType, kModelTypeBpe);
  trainer.Varint(kTrainerVocabSize, static_cast<int64_t>(spec.pieces.size()));
  trainer.Varint(kTrainerByteFallback, spec.byte_fallback);
  trainer.Varint(kTrainerUnkId, spec.unk_id);
  trainer.Varint(kTrainerBosId, spec.bos_id);
  trainer.Varint(kTrainerEosId, spec.eos_id);
  trainer.Varint(kTrainerPadId, spec.pad_id);
  trainer.Bytes(kTrainerUnkPiece, PieceText(spec, spec.unk_id, "<unk>"));
  trainer.Bytes(kTrainerBosPiece, PieceText(spec, spec.bos_id, "<s>"));
  trainer.Bytes(kTrainerEosPiece, PieceText(spec, spec.eos_id, "</s>"));
  trainer.Bytes(kTrainerPadPiece, PieceText(spec, spec.pad_id, "<pad>"));
  return trainer.bytes();
}

}  // namespace

std::string SerializeSentencePieceModel(const SentencePieceSpec& spec) {
  Message model;
  for (const SentencePieceSpec::Piece& piece : spec.pieces) {
    Message entry;
    entry.Bytes(kPieceText, piece.text);
    entry.Float(kPieceScore, piece.score);
    entry.Varint(kPieceType, static_cast<int>(piece.type));
    model.Bytes(kModelPieces, entry.bytes());
  }
  model.Bytes(kModelTrainerSpec, TrainerSpec(spec));
  Message normalizer;
  normalizer.Bytes(kNormalizerName, "identity");
  normalizer.Varint(kNormalizerAddDummyPrefix, spec.add_dummy_prefix);
  normalizer.Varint(kNormalizerRemoveExtraWhitespaces, spec.remove_extra_whitespaces);
  normalizer.Varint(kNormalizerEscapeWhitespaces, true);
  model.Bytes(kModelNormalizerSpec, normalizer.bytes());
  return model.bytes();
}

}  // namespace llama
